"""advisor's public surface: what `import advisor` offers, and that it costs a worker nothing."""

from __future__ import annotations

import subprocess
import sys

import advisor


def test_every_public_name_resolves_to_where_it_lives():
    from advisor import _MODULE_OF

    assert set(advisor.__all__) == {*_MODULE_OF, "__version__"}
    for name in advisor.__all__:
        assert getattr(advisor, name) is not None
    assert callable(advisor.run) and callable(advisor.estimate)  # functions, not the modules
    assert issubclass(advisor.WorkloadError, advisor.AdvisorError)


def test_importing_advisor_imports_neither_optuna_nor_sqlalchemy():
    """The worker imports the package for each trial; it should pay only for what it uses."""
    code = "import sys, advisor; print(sorted({'optuna', 'sqlalchemy'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stderr
