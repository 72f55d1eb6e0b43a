"""Loading a step from the user's script (what a step's own process does): a pipeline call at
the script's top level never runs there, and a script that cannot load fails with the reason."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from wharf.config.spec import StepSpec
from wharf.core.errors import InputError
from wharf.execution.step_runner import SCRIPT_MODULE, import_step

HEADER = """
from wharf import pipeline, step

EVENTS = []

@step
def load() -> int:
    return 1

@pipeline
def training() -> None:
    load()
"""


@pytest.fixture(autouse=True)
def _forget_script() -> Iterator[None]:
    yield
    sys.modules.pop(SCRIPT_MODULE, None)


def spec_for(script: Path, qualname: str = "load") -> StepSpec:
    return StepSpec(
        name=qualname, source=f"__main__:{qualname}", source_file=str(script), code_hash="x"
    )


def test_the_script_stops_at_the_pipeline_call(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "train.py"
    script.write_text(HEADER + "run = training()\nprint(run.status)\nraise SystemExit('after')\n")
    with caplog.at_level(logging.DEBUG, logger="wharf.sdk.pipeline"):
        step = import_step(spec_for(script))
    assert step.func() == 1
    told = [r for r in caplog.records if r.name == "wharf.sdk.pipeline"]
    assert len(told) == 1 and told[0].levelno == logging.DEBUG  # as documented: no nag
    message = told[0].getMessage()
    assert message.startswith("Not running pipeline 'training' in the process of step 'load'")
    assert "the rest of the script is skipped" in message and "__main__" not in message


def test_a_call_before_the_step_is_defined_does_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "two.py"
    script.write_text(
        HEADER
        + "training()\ntraining()\n"  # the step below is not defined yet: the script goes on
        + "@step\ndef later() -> int:\n    return 2\n"
    )
    with caplog.at_level(logging.INFO, logger="wharf.sdk.pipeline"):
        step = import_step(spec_for(script, "later"))
    assert step.func() == 2
    told = [r for r in caplog.records if r.name == "wharf.sdk.pipeline"]
    assert len(told) == 1 and told[0].levelno == logging.INFO
    assert "the script goes on" in told[0].getMessage()
    assert '`if __name__ == "__main__":`' in told[0].getMessage()


def test_a_script_that_raises_names_the_step_and_the_error(tmp_path: Path) -> None:
    script = tmp_path / "broken.py"
    script.write_text("import json\njson.loads('{')\n" + HEADER)
    with pytest.raises(InputError) as info:
        import_step(spec_for(script))
    message = str(info.value)
    assert message.startswith(f"Cannot import step 'load': loading {script} raised JSONDecodeError")
    assert SCRIPT_MODULE not in sys.modules  # a later attempt executes the script again


def test_a_step_defined_under_the_main_guard_is_said_to_be_so(tmp_path: Path) -> None:
    """Its process loads the script as no ``__main__``: the step is not there. The reason says
    so, not the internal module name the script was loaded under."""
    script = tmp_path / "guarded.py"
    script.write_text(
        "from wharf import step\n"
        "if __name__ == '__main__':\n"
        "    @step\n"
        "    def hidden() -> int:\n"
        "        return 1\n"
    )
    with pytest.raises(InputError) as info:
        import_step(spec_for(script, "hidden"))
    message = str(info.value)
    assert message.startswith(f"Step 'hidden' is not defined at the top level of {script}")
    assert "define it at module level" in message
    assert SCRIPT_MODULE not in message and "\n" not in message
