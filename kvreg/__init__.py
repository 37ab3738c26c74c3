"""kvreg: a capacity registry for LLM serving."""

import importlib.util
import os

__version__ = "0.1.0"


def resource_dir(name: str) -> str:
    """The folder of kvreg's `migrations` or `templates` (standard library only, imports nothing of them).

    The repository keeps both at its top level; pyproject.toml installs them as the packages
    kvreg.migrations and kvreg.templates (an editable install maps them there too). When kvreg is
    imported straight from a checkout instead (`python -m pytest` in a checkout after a plain
    `pip install .` puts the checkout first on sys.path), kvreg/ has no such subpackage: the
    folder beside kvreg/ is then the one.
    """
    spec = importlib.util.find_spec(f"{__name__}.{name}")
    if spec is not None and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    beside = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), name)
    if os.path.isfile(os.path.join(beside, "__init__.py")):
        return beside
    raise ModuleNotFoundError(f"kvreg is incomplete: neither kvreg.{name} nor {beside} exists; reinstall it")
