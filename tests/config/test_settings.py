import pytest
from pydantic import ValidationError

from wharf.config.settings import (
    MAX_RETRY_DELAY,
    CachePolicy,
    PoolResourceDemand,
    ResourceSettings,
    RetryConfig,
    Schedule,
)
from wharf.config.spec import StepConfig
from wharf.core.enums import ReclaimTolerance, StepRuntime
from wharf.core.resources import ByteUnit, parse_memory


def test_memory_units():
    assert parse_memory("2GiB") == (2, ByteUnit.GIB)
    assert parse_memory("10KB") == (10, ByteUnit.KB)
    assert parse_memory("7B") == (7, ByteUnit.B)
    assert ByteUnit.KIB.byte_value == 1024 and ByteUnit.GB.byte_value == 10**9
    for bad in ("1 KB", "-1KB", "KB", "1AB"):
        with pytest.raises(ValidationError):
            ResourceSettings(memory=bad)


@pytest.mark.parametrize("memory", ["0GiB", "0B", "000MiB"])
def test_no_memory_is_an_error_where_it_is_written(memory):
    """Not later, when the step is launched: its demand failed there (quantity must be
    positive) with a traceback, and the run failed with no step and no reason."""
    with pytest.raises(ValidationError, match="memory must be more than 0 bytes"):
        ResourceSettings(memory=memory)
    assert ResourceSettings(memory="1B").canonical_demands()[0].quantity == 1


@pytest.mark.parametrize("cpus", [float("inf"), float("nan"), 0, -1])
def test_cpus_must_be_a_positive_finite_number(cpus):
    """Infinity used to be accepted, then stored as null (JSON has no infinity): the step ran
    without asking for any resource."""
    with pytest.raises(ValidationError, match="cpu_count"):
        ResourceSettings(cpu_count=cpus)
    stored = ResourceSettings(cpu_count=1e6).model_dump(mode="json")
    assert ResourceSettings.model_validate(stored).canonical_demands()[0].quantity == 10**6


@pytest.mark.parametrize(
    "field", ["allocation_wait_timeout_seconds", "initialization_lease_seconds"]
)
def test_waits_longer_than_the_resource_manager_takes_are_errors_where_written(field):
    """A wait of 10**12 s was accepted here, then the workspace server failed to make the
    step's request (500, an internal error) and the run failed with no step."""
    with pytest.raises(ValidationError, match=field):
        ResourceSettings(cpu_count=1, **{field: 10**12})
    nine_years = 9 * 365 * 24 * 3600  # the RM takes ten, and the wait gets a margin
    assert getattr(ResourceSettings(**{field: nine_years}), field) == nine_years


def test_resource_inputs_normalise():
    assert ResourceSettings(resources="license").normalized_resources == [
        PoolResourceDemand(name="license", quantity=1)
    ]
    assert ResourceSettings(resources={"tpu": 4}).normalized_resources == [
        PoolResourceDemand(name="tpu", quantity=4)
    ]
    one = PoolResourceDemand(name="x", quantity=2, class_name="big")
    assert ResourceSettings(resources=one).normalized_resources == [one]
    assert ResourceSettings(resources=[one, one]).normalized_resources == [one, one]


@pytest.mark.parametrize("resources", ["lïcense", "", "a b", {"lïcense": 1}, {"": 2}])
def test_a_bad_resource_name_is_an_error_where_it_is_written(resources):
    """Not later, when the step is launched (it failed there with a traceback, and the run
    with 'no steps')."""
    with pytest.raises(ValidationError, match="should match pattern") as failed:
        ResourceSettings(resources=resources)
    assert failed.value.error_count() == 1


@pytest.mark.parametrize(
    ("quantity", "shown"), [(-1, "-1"), (0, "0"), (1.5, "1.5"), ("two", "'two'")]
)
def test_a_bad_resource_quantity_is_one_clear_error(quantity, shown):
    """Not one error per input form of the union ("Input should be a valid string", ...)."""
    with pytest.raises(ValidationError) as failed:
        ResourceSettings(resources={"license": quantity})
    assert failed.value.error_count() == 1
    message = failed.value.errors()[0]["msg"]
    assert message == (
        f"Value error, resources['license'] must be a positive whole quantity, got {shown}"
    )


def test_canonical_demands_order_and_units():
    settings = ResourceSettings(
        resources={"license": 1}, gpu_count=2, gpu_class="h100", cpu_count=1.5, memory="2GiB"
    )
    demands = settings.canonical_demands()
    assert [(d.name, d.kind, d.quantity, d.unit, d.class_name) for d in demands] == [
        ("license", None, 1, None, None),
        (None, "gpu", 2, None, "h100"),
        (None, "cpu", 1500, "mCPU", None),
        (None, "memory", 2, "GiB", None),
    ]
    assert ResourceSettings(cpu_count=4).canonical_demands()[0].unit == "CPU"
    assert ResourceSettings(gpu_count=0).canonical_demands() == []
    assert settings.has_basic_resource_demands
    assert not ResourceSettings(resources="license").has_basic_resource_demands


def test_legacy_input():
    assert ResourceSettings(preemptible=True).reclaim_tolerance is ReclaimTolerance.COORDINATED
    assert ResourceSettings(preemptible=False).reclaim_tolerance is ReclaimTolerance.NONE
    explicit = ResourceSettings(preemptible=True, reclaim_tolerance="any")
    assert explicit.reclaim_tolerance is ReclaimTolerance.ANY
    assert ResourceSettings(pool_resources={"gpu": 1}).normalized_resources[0].name == "gpu"


def test_unset_tolerance_stays_unset_through_storage():
    settings = ResourceSettings(resources={"license": 1})
    config = StepConfig(resources=settings)
    stored = config.model_dump(mode="json", exclude_unset=True)
    again = StepConfig.model_validate(stored)
    assert again.resources is not None
    assert not again.resources.reclaim_tolerance_explicitly_set
    assert again.resources.effective_reclaim_tolerance(StepRuntime.INLINE) is ReclaimTolerance.NONE
    assert again.resources.effective_reclaim_tolerance(StepRuntime.ISOLATED) is ReclaimTolerance.ANY
    full = StepConfig.model_validate(config.model_dump(mode="json"))
    assert full.resources is not None and not full.resources.reclaim_tolerance_explicitly_set
    explicit = ResourceSettings(reclaim_tolerance="any")
    assert explicit.effective_reclaim_tolerance(StepRuntime.INLINE) is ReclaimTolerance.ANY


def test_timeouts_positive():
    with pytest.raises(ValidationError):
        ResourceSettings(allocation_wait_timeout_seconds=0)
    assert ResourceSettings().allocation_wait_timeout_seconds == 3600
    assert ResourceSettings().initialization_lease_seconds == 3600


def test_retry_backoff():
    retry = RetryConfig(max_retries=3, delay=2, backoff=3)
    assert [retry.delay_before(a) for a in (2, 3, 4)] == [2, 6, 18]
    with pytest.raises(ValidationError):
        RetryConfig(backoff=0.5)


@pytest.mark.parametrize(
    "values",
    [{"delay": float("inf")}, {"delay": 1e300}, {"backoff": float("inf")}, {"delay": -1}],
)
def test_a_retry_delay_beyond_a_day_is_refused(values: dict[str, float]) -> None:
    """An infinite or huge delay was accepted, then replaced the step's own error with an
    OverflowError when the retry came."""
    with pytest.raises(ValidationError):
        RetryConfig(max_retries=1, **values)


def test_a_growing_retry_delay_stops_at_a_day() -> None:
    retry = RetryConfig(max_retries=2_000, delay=1e-300, backoff=1_000)
    assert retry.delay_before(2) == 1e-300
    assert retry.delay_before(120) == retry.delay_before(2_000) == MAX_RETRY_DELAY == 86_400
    assert RetryConfig(max_retries=2_000, backoff=1_000).delay_before(2_000) == 0


def test_cache_policy():
    assert CachePolicy.from_string("default") == CachePolicy()
    with pytest.raises(ValueError, match="Unknown cache policy"):
        CachePolicy.from_string("fast")

    policy = CachePolicy(cache_func=module_cache_func, source_dependencies=[module_cache_func])
    assert policy.cache_func == "tests.config.test_settings:module_cache_func"
    assert policy.source_dependencies == ("tests.config.test_settings:module_cache_func",)


def module_cache_func() -> str:
    return "x"


def test_a_cache_policy_refuses_functions_no_import_path_reaches() -> None:
    def local_func() -> str:
        return "x"

    for func in (local_func, lambda: "x"):
        with pytest.raises(ValidationError, match="defined at module level"):
            CachePolicy(cache_func=func)
        with pytest.raises(ValidationError, match="cannot be imported by its path"):
            CachePolicy(source_dependencies=[func])


def test_schedule_validation():
    assert Schedule(cron_expression="*/5 * * * *").cron_expression
    with pytest.raises(ValidationError, match="exactly one"):
        Schedule()
    with pytest.raises(ValidationError, match="Invalid cron"):
        Schedule(cron_expression="not a cron")
    assert Schedule(cron_expression="0 0 29 2 *").cron_expression  # leap days only
    with pytest.raises(ValidationError, match="'0 0 30 2 \\*' never fires"):
        Schedule(cron_expression="0 0 30 2 *")


def test_a_schedule_takes_a_naive_time_as_utc_beside_an_aware_one() -> None:
    """One aware and one naive time raised a bare TypeError (comparing them)."""
    from datetime import UTC, datetime, timedelta, timezone

    start = datetime(2030, 1, 1, tzinfo=UTC)
    kept = Schedule(interval_seconds=60, start_time=start, end_time=datetime(2031, 1, 1))
    assert kept.end_time == datetime(2031, 1, 1)
    with pytest.raises(ValidationError, match="end_time must be after its start_time"):
        Schedule(interval_seconds=60, start_time=start, end_time=datetime(2029, 12, 31, 23))
    east = timezone(timedelta(hours=2))  # 00:30 at +02:00 is 22:30 UTC, before the start
    with pytest.raises(ValidationError, match="end_time must be after its start_time"):
        Schedule(
            interval_seconds=60,
            start_time=datetime(2030, 1, 1),
            end_time=datetime(2030, 1, 1, 0, 30, tzinfo=east),
        )


def test_a_cron_schedule_that_never_fires_in_its_window_is_refused() -> None:
    from datetime import datetime

    start = datetime(2030, 1, 1, 0, 0, 1)
    with pytest.raises(ValidationError) as refused:
        Schedule(cron_expression="0 0 * * *", start_time=start, end_time=datetime(2030, 1, 1, 1))
    assert (
        "Cron expression '0 0 * * *' never fires between the schedule's start_time "
        "(2030-01-01 00:00:01 UTC) and end_time (2030-01-01 01:00:00 UTC): its first time is "
        "2030-01-02 00:00:00 UTC."
    ) in str(refused.value)
    at_start = Schedule(
        cron_expression="0 0 * * *", start_time=datetime(2030, 1, 1), end_time=start
    )
    assert at_start.start_time == datetime(2030, 1, 1)  # it fires at its start: kept


@pytest.mark.parametrize("cron", ["* * * * * *", "0 0 3 * * * 2030", "*/5 * * * * 30"])
def test_a_schedule_refuses_a_seconds_or_years_field(cron: str) -> None:
    """croniter reads a sixth field as seconds (a seventh as years); no scheduler Wharf hands a
    schedule to fires on those (a Kubernetes CronJob takes five fields), so such a schedule
    would be stored and never fire as written."""
    with pytest.raises(ValidationError, match=r"takes five fields .*seconds and years"):
        Schedule(cron_expression=cron)
    assert Schedule(cron_expression="@daily").cron_expression == "@daily"


def test_wants_resources_is_any_demand():
    from wharf.config.spec import StepSpec, wants_resources

    def spec(resources: ResourceSettings | None) -> StepSpec:
        return StepSpec(
            name="s", source="m:s", code_hash="h", config=StepConfig(resources=resources)
        )

    assert not wants_resources(None)
    assert not wants_resources(spec(None))
    assert not wants_resources(spec(ResourceSettings(gpu_count=0)))
    assert wants_resources(spec(ResourceSettings(resources="license")))
    assert wants_resources(spec(ResourceSettings(cpu_count=0.5)))
