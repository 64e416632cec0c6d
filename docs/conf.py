"""Sphinx configuration of nhfast's documentation.

Build (as .ci/run does)::

    python -m pip install ".[docs]"
    sphinx-build -W --keep-going -n -b html docs build/docs
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs"))

import nhfast  # noqa: E402

os.environ.setdefault("MPLBACKEND", "Agg")

project = "nhfast"
author = "the nhfast developers"
copyright = "the nhfast developers"
version = release = nhfast.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "sphinxarg.ext",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "examples"]
templates_path = ["_templates"]
html_static_path: list[str] = []

html_theme = "pydata_sphinx_theme"
html_title = f"nhfast {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
}

# -- API reference ----------------------------------------------------------------------------
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"  # types are stated in the numpydoc sections
autodoc_default_options = {"members": False, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks: set[str] = set()

myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

# The build runs offline (no inventories are fetched): names of Python, NumPy, SymPy, SciPy,
# Dask and Zarr that docstrings mention are not resolved to their sites.
intersphinx_mapping: dict[str, tuple[str, str | None]] = {}
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|sympy|sp|scipy|dask|distributed|zarr|matplotlib|argparse)\..*"),
    (r"py:.*", r"(collections\.abc|typing|pathlib|os|concurrent)\..*"),
]

# -- Gallery ----------------------------------------------------------------------------------
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "image_scrapers": ("matplotlib",),
}


# -- References by any import path ------------------------------------------------------------
# Docstrings name objects as their modules see them (``integrate``, ``nhfast.integrate.integrate``,
# ``NonholonomicSystem``). Each such name is resolved to the object it denotes: a public object
# links to its page in the API reference (under the name listed there); an internal helper of
# nhfast (a name outside every ``__all__``) has no page and is shown as code. Names that denote
# nothing in nhfast still warn.
import importlib  # noqa: E402
import pkgutil  # noqa: E402

from docutils import nodes  # noqa: E402

_API_MODULES = [
    "nhfast",
    "nhfast.analysis",
    "nhfast.symbolic",
    "nhfast.symbolic.vakonomic",
    "nhfast.symbolic.rigid_body",
    "nhfast.systems",
    "nhfast.systems.veselova_body",
    "nhfast.codegen",
    "nhfast.distributed",
    "nhfast.events",
    "nhfast.experiments",
    "nhfast.hamiltonised",
]


def _modules() -> list:
    mods = [nhfast]
    for info in pkgutil.walk_packages(nhfast.__path__, "nhfast."):
        if not info.name.endswith("__main__"):
            mods.append(importlib.import_module(info.name))
    return mods


_MODS = _modules()
_PUBLIC: dict[int, str] = {}
for _m in _API_MODULES:
    _mod = importlib.import_module(_m)
    for _n in _mod.__all__:
        _PUBLIC.setdefault(id(getattr(_mod, _n)), f"{_m}.{_n}")


def _lookup(target: str) -> tuple[object, str] | None:
    """The object ``target`` denotes (dotted path, or a name of some nhfast module), and the
    rest of the path after the part found."""
    parts = target.lstrip("~.").split(".")
    for k in range(len(parts), 0, -1):
        head = ".".join(parts[:k])
        try:
            obj: object = importlib.import_module(head)
            rest = parts[k:]
        except ImportError:
            obj, rest = None, []
            for mod in _MODS:
                if hasattr(mod, parts[0]):
                    obj, rest = getattr(mod, parts[0]), parts[1:]
                    break
            if obj is None and k == 1:
                return None
            if obj is None:
                continue
        for attr in rest:
            fields = getattr(obj, "__dataclass_fields__", {})
            if not hasattr(obj, attr) and attr not in fields:
                return None
            obj = getattr(obj, attr, fields.get(attr))
        return obj, ".".join(rest)
    return None


def _missing_reference(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    module = node.get("py:module") or "nhfast"
    found = None
    if node.get("py:class"):  # a member named from inside its class
        found = _lookup(f"{module}.{node['py:class']}.{target}")
        if found is not None:
            target = f"{module}.{node['py:class']}.{target}"
    if found is None:
        found = _lookup(target)
    if found is None:
        found = _lookup(f"{module}.{target}")
    if found is None:
        return None
    obj, _ = found
    canonical = _PUBLIC.get(id(obj))
    if canonical is None:
        owner = _lookup(target.rsplit(".", 1)[0]) if "." in target else None
        if owner is not None and id(owner[0]) in _PUBLIC:
            canonical = f"{_PUBLIC[id(owner[0])]}.{target.rsplit('.', 1)[1]}"
    if canonical is not None:
        domain = env.get_domain("py")
        refs = domain.resolve_any_xref(env, node["refdoc"], app.builder, canonical, node, contnode)
        if refs:
            return refs[0][1]
    # an internal helper, or a member without a page: shown as code, not linked
    return contnode if isinstance(contnode, nodes.literal) else nodes.literal("", target)


def setup(app):
    app.connect("missing-reference", _missing_reference)
