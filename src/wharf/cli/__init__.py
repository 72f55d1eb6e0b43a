"""The ``wharf`` command line: a thin layer over ``Client``; imports lazily for fast start-up."""
