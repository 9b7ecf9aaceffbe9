"""``import skbayes`` and the command's ``--help`` import neither torch nor scikit-learn; first use does."""

import subprocess
import sys

import pytest

import skbayes


def _modules_after(code):
    """The heavy modules imported by ``code`` in a fresh interpreter, as a set of names."""
    probe = code + "\nimport sys\nprint(sorted(m for m in ('torch', 'sklearn', 'pandas') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(eval(out.strip().splitlines()[-1]))


def test_import_skbayes_imports_no_torch():
    assert _modules_after("import skbayes") == set()


def test_command_help_imports_no_torch():
    code = ("from click.testing import CliRunner\nfrom skbayes._cli import make_cli\n"
            "for args in (['--help'], ['evaluate', '--help'], ['fit', '--help'], ['predict', '--help']):\n"
            "    result = CliRunner().invoke(make_cli(), args)\n"
            "    assert result.exit_code == 0 and 'Usage' in result.output, result.output\n")
    assert _modules_after(code) == set()


def test_the_console_entry_point_help_imports_no_numpy():
    # main() only looks click and pandas up before parsing; --help then needs neither pandas nor numpy
    code = ("from skbayes._cli import main\ntry:\n    main(['evaluate', '--help'])\n"
            "except SystemExit as exc:\n    assert exc.code == 0\nimport sys\nassert 'numpy' not in sys.modules\n")
    assert _modules_after(code) == set()


def test_first_use_imports_the_estimator():
    assert "torch" in _modules_after("from skbayes import BayesianMLPRegressor")


@pytest.mark.parametrize("name", skbayes.__all__)
def test_every_public_name_resolves(name):
    assert getattr(skbayes, name) is not None
    assert name in dir(skbayes)


def test_submodules_resolve_and_unknown_names_raise():
    assert skbayes.inference.SGHMC.__module__.startswith("skbayes.inference")
    assert skbayes.nn.SGHMC.__module__.startswith("skbayes.nn")
    namespace = {}
    exec("from skbayes import *", namespace)
    assert {name for name in skbayes.__all__} <= set(namespace)
    with pytest.raises(AttributeError, match="no attribute 'NotAnEstimator'"):
        skbayes.NotAnEstimator  # noqa: B018
