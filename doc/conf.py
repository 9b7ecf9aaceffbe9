"""Sphinx configuration of the skbayes documentation.

Build the site (offline, warnings as errors) from the repository root with::

    python -m sphinx -W --keep-going -n -b html doc doc/_build/html

The user guide is MyST Markdown (``doc/*.md``), the API reference is
``doc/api.rst`` (autosummary writes one page per object under
``doc/generated/``), and the gallery is built by sphinx-gallery from
``examples/plot_*.py``, each example executed at build time (into
``doc/auto_examples/``). Nothing is fetched from the network: no intersphinx,
so references to numpy, torch, scikit-learn and the like are rendered
without links (``nitpick_ignore_regex`` below).
"""

import functools
import importlib
import inspect
import os
import pkgutil
import re
import sys
import types
from pathlib import Path

DOC_DIR = Path(__file__).resolve().parent
ROOT = DOC_DIR.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")

import skbayes  # noqa: E402

# -- Project -----------------------------------------------------------------

project = "skbayes"
author = "The skbayes developers"
copyright = "The skbayes developers"
release = skbayes.__version__
version = re.sub(r"\.dev\d*$", "", release)

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
]

root_doc = "index"
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
templates_path = ["_templates"]
exclude_patterns = [
    "_build",
    "Thumbs.db",
    ".DS_Store",
    # sphinx-gallery's by-products that are not pages of their own.
    "auto_examples/*.ipynb",
    "auto_examples/*.py",
    "auto_examples/*.zip",
    "auto_examples/*.md5",
    "auto_examples/*.json",
    "auto_examples/*.pickle",
]
language = "en"
default_role = "literal"  # `x` in a docstring is code, as in numpydoc's style
pygments_style = "sphinx"

# -- Cross-references --------------------------------------------------------

# Every reference must resolve (``-n``); what cannot resolve offline is the
# documentation of other libraries, listed here. References to skbayes objects
# are never ignored: a broken one fails the build.
nitpicky = True
_EXTERNAL = (
    r"(numpy|np|torch|sklearn|scipy|matplotlib|pandas|dask|distributed|joblib|mapie"
    r"|ngboost|gpytorch|tqdm|click|collections|typing|types|abc|enum|numbers|os|pathlib"
    r"|io|re|warnings|functools|contextlib|dataclasses|math|random|pickle)"
)
nitpick_ignore_regex = [
    (r"py:.*", _EXTERNAL + r"(\..*)?"),
    # Python's builtins.
    (r"py:.*", r"(int|float|complex|str|bytes|bool|dict|list|tuple|set|frozenset|object"
               r"|type|slice|range|callable|Ellipsis|None|True|False|NotImplemented"
               r"|[A-Za-z]*(Error|Exception|Warning))"),
    # User-guide labels and glossary terms of scikit-learn, in the docstrings
    # of the methods skbayes' estimators inherit from it (score, set_output,
    # get_metadata_routing, set_fit_request, ...).
    (r"std:ref", r"(r2_score|accuracy_score|df_output_transform|metadata_routing"
                 r"|sphx_glr_auto_examples_miscellaneous_plot_set_output\.py)"),
    (r"std:term", r"meta-estimator"),
]


# numpydoc: the class template lists the methods. In the types of a
# "Parameters" entry ("tensor of shape (n, M)", "MeanFieldLinear or None"),
# only the names of skbayes objects become links (numpydoc_xref_aliases, set
# below once the objects are known); the other words are plain text.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True
numpydoc_xref_param_type = True
numpydoc_xref_ignore = "all"

# -- autodoc / autosummary ---------------------------------------------------

autosummary_generate = True
autosummary_imported_members = False
autodoc_typehints = "none"  # numpydoc sections state the types
autodoc_member_order = "groupwise"
# The class templates (doc/_templates/autosummary/class.rst) document the
# members, with those inherited from scikit-learn (get_params, score, ...) like
# scikit-learn's own pages, but not those inherited from torch and from
# Python's builtins (``:inherited-members: Module,Optimizer,...``).
autodoc_inherit_docstrings = True
add_module_names = False
python_maximum_signature_line_length = 88


def _public_modules():
    """The importable modules of skbayes whose path has no private component."""
    names = ["skbayes"] + [m.name for m in pkgutil.walk_packages(skbayes.__path__, "skbayes.")]
    names = [n for n in names if not any(p.startswith("_") for p in n.split("."))]
    return sorted(names, key=lambda n: (n.count("."), n))


def _key(name, obj):
    """What identifies an exported object: itself, or for a scalar its name too.

    Equal small numbers and strings may be one Python object; a scalar
    constant is the same export only under the same name.
    """
    return (name, id(obj)) if isinstance(obj, (bool, int, float, str)) else id(obj)


def _canonical_names():
    """Map each public object (its ``_key``) to the one name it is documented under.

    The name is the shortest public path that exports the object in its
    ``__all__`` (``skbayes.nn.MeanFieldLinear`` rather than
    ``skbayes.nn.layers.mean_field.MeanFieldLinear``); ``doc/api.rst`` documents
    every object under that name (``tests/test_docs_build.py`` checks it).
    """
    canonical = {}
    for modname in _public_modules():
        module = importlib.import_module(modname)
        canonical.setdefault(id(module), modname)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            canonical.setdefault(_key(name, obj), f"{modname}.{name}")
    return canonical


_CANONICAL = _canonical_names()


def _module_contents():
    """Per public module, what its ``__all__`` exports (for its page).

    ``own``: documented on the module's page (the object is exported by no
    shorter path); the others link to where they are documented.
    """
    contents = {}
    for modname in _public_modules():
        module = importlib.import_module(modname)
        items = []
        for name in getattr(module, "__all__", ()):
            if name.startswith("__"):
                continue
            obj = getattr(module, name)
            if isinstance(obj, types.ModuleType):
                continue  # a sub-module has a page of its own
            canonical = _CANONICAL.get(_key(name, obj), f"{modname}.{name}")
            own = canonical == f"{modname}.{name}"
            items.append({"name": name, "canonical": canonical, "own": own})
        contents[modname] = items
    return contents


autosummary_context = {"module_contents": _module_contents()}


def _xref_aliases():
    """Short and full names of the skbayes classes, for the types of numpydoc entries."""
    by_short = {}
    for canonical in _CANONICAL.values():
        by_short.setdefault(canonical.rpartition(".")[2], set()).add(canonical)
    # numpydoc's own aliases ("float" -> Python's docs, "array-like" -> NumPy's
    # glossary) cannot resolve offline: those words stay plain text.
    from numpydoc.xref import DEFAULT_LINKS

    aliases = {word: word for word in DEFAULT_LINKS}
    aliases.update({canonical: canonical for canonical in _CANONICAL.values()})
    # A short name that two objects share (SGHMC, Vadam) is linked only in full.
    aliases.update({short: names.pop() for short, names in by_short.items() if len(names) == 1})
    return aliases


numpydoc_xref_aliases = _xref_aliases()


def _skip_member(app, what, name, obj, skip, options):
    """Leave out what torch and Python document: the members inherited from them.

    autodoc leaves them out by the ``inherited-members`` option of the class
    template; this hook does the same for the method table of that template
    (autosummary's ``methods``), which also leaves out the undocumented
    methods autodoc does not show.
    """
    if skip:
        return None
    owner = getattr(obj, "__objclass__", None)
    module = getattr(obj, "__module__", None) or getattr(owner, "__module__", None) or ""
    if callable(obj) and (module.startswith("torch") or module == "builtins"):
        return True
    if callable(obj) and not inspect.getdoc(obj):
        return True
    return None


def _resolve_alias(app, env, node, contnode):
    """Resolve a reference to an skbayes object spelled by another path.

    Docstrings name objects where they are defined
    (``skbayes.nn.layers.MeanFieldLinear``) or relative to the module that
    defines them (``MeanFieldLinear`` inside ``skbayes.nn.networks.module``);
    the reference documents each object once, under its shortest public path.
    Such a reference is resolved to that page when the name imports to the
    same Python object; a name that does not import still fails the build.
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip(".~")
    contexts = []  # (documented module or class) the reference was written in
    module, cls = node.get("py:module") or "", node.get("py:class") or ""
    if module:
        contexts.append(f"{module}.{cls}" if cls else module)
    if node["refdoc"].startswith("generated/"):  # the object of an API page
        contexts.append(node["refdoc"].removeprefix("generated/"))
    candidates = [target]
    for context in contexts:
        candidates.append(f"{context}.{target}")
        try:
            obj = _import_dotted(context)
        except Exception:
            continue
        if isinstance(obj, types.ModuleType):
            homes = [obj.__name__]
        else:  # the names the defining module imports, and the defining class's
            homes = [getattr(obj, "__module__", None) or ""]
            if "." in getattr(obj, "__qualname__", ""):
                homes.append(f"{homes[0]}.{obj.__qualname__.rpartition('.')[0]}")
            if inspect.isclass(obj):
                homes.append(f"{homes[0]}.{obj.__qualname__}")
        candidates.extend(f"{home}.{target}" for home in homes if home)
    py = env.get_domain("py")
    for candidate in dict.fromkeys(candidates):
        if not candidate.startswith("skbayes."):
            continue
        try:
            obj = _import_dotted(candidate)
        except Exception:
            continue
        name = _documented_name(obj, candidate)
        if name is None:
            continue
        for role in (node["reftype"], "obj"):
            newnode = py.resolve_xref(env, node["refdoc"], app.builder, role, name, node, contnode)
            if newnode is not None:
                return newnode
    return None


def _documented_name(obj, dotted):
    """The name ``obj`` is documented under, for members too (``Class.method``)."""
    owner, _, attr = dotted.rpartition(".")
    if _key(attr, obj) in _CANONICAL:
        return _CANONICAL[_key(attr, obj)]
    try:
        parent = _import_dotted(owner)
    except Exception:
        return None
    if inspect.isclass(parent) and id(parent) in _CANONICAL:
        return f"{_CANONICAL[id(parent)]}.{attr}"
    return None


def _drop_torch_docstrings(app, what, name, obj, options, lines):
    """Empty the docstrings skbayes' methods inherit from torch (``forward``, ``train``).

    They are written for torch's documentation (Google style, references to
    its own classes); an override without a docstring of its own is shown
    without one.
    """
    if what not in ("method", "attribute", "property"):
        return
    owner_name, _, attr = name.rpartition(".")
    try:
        owner = _import_dotted(owner_name)
    except Exception:
        return
    if not inspect.isclass(owner):
        return
    for klass in owner.__mro__:
        member = klass.__dict__.get(attr)
        if member is None:
            continue
        if getattr(inspect.unwrap(getattr(member, "__func__", member)), "__doc__", None):
            if klass.__module__.startswith("torch"):
                lines[:] = []
            return


@functools.cache
def _attribute_comments(modname):
    """``{name: lines}`` of the ``#:`` comments above a module's assignments."""
    from sphinx.pycode import ModuleAnalyzer

    try:
        docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
    except Exception:
        return {}
    return {name: list(lines) for (namespace, name), lines in docs.items() if namespace == ""}


def _constant_docstring(app, what, name, obj, options, lines):
    """Document a re-exported constant by the ``#:`` comment where it is assigned.

    autodoc reads the comments of the module a constant is documented under
    (``skbayes.nn``), not of the one that assigns it (``skbayes.nn.functional``),
    and would show the docstring of its type (``float``) instead.
    """
    if what != "data":
        return
    modname, _, attr = name.rpartition(".")
    if attr in _attribute_comments(modname):
        return
    for other in sorted(m for m in sys.modules if m == "skbayes" or m.startswith("skbayes.")):
        if getattr(sys.modules[other], attr, None) is obj and attr in _attribute_comments(other):
            lines[:] = _attribute_comments(other)[attr]
            return
    if "\n".join(lines).strip() == inspect.cleandoc(type(obj).__doc__ or ""):
        lines[:] = []  # not the docstring of ``tuple``


_CITATION_REF = re.compile(r"\[([A-Za-z][\w-]*)\]_")
_CITATION_DEF = re.compile(r"^(\s*)\.\. \[([A-Za-z][\w-]*)\](.*)$")


def _citation_definitions(docstring):
    """``{label: [lines]}`` of the ``.. [label] text`` entries of a docstring."""
    definitions = {}
    lines = inspect.cleandoc(docstring or "").splitlines()
    for i, line in enumerate(lines):
        match = _CITATION_DEF.match(line)
        if not match:
            continue
        indent = len(match.group(1))
        entry = [f".. [{match.group(2)}]{match.group(3)}"]
        for more in lines[i + 1 :]:
            if more.strip() and len(more) - len(more.lstrip()) <= indent:
                break
            entry.append(more[indent:] if more.strip() else "")
        while entry[-1] == "":
            entry.pop()
        definitions[match.group(2)] = entry
    return definitions


def _list_uncited_references(lines):
    """Turn the reference entries a docstring never cites into a plain list.

    A module's docstring often lists the works its functions and classes
    cite, not its own text; as citations they would be reported as
    unreferenced, as list items they read the same.
    """
    cited = set(_CITATION_REF.findall("\n".join(lines)))
    i = 0
    while i < len(lines):
        match = _CITATION_DEF.match(lines[i])
        if match and match.group(2) not in cited:
            indent = match.group(1)
            lines[i : i + 1] = ["", f"{indent}- [{match.group(2)}]{match.group(3)}"]
            i += 2
            while i < len(lines) and lines[i].strip() and len(lines[i]) - len(lines[i].lstrip()) > len(indent):
                lines[i] = indent + "  " + lines[i].lstrip()
                i += 1
            lines.insert(i, "")
        else:
            i += 1


def _add_cited_references(app, what, name, obj, options, lines):
    """Copy into a docstring the references it cites but defines elsewhere.

    The docstrings of skbayes cite ``[Label]_`` entries that the module's or
    the class's docstring lists once under "References". numpydoc makes each
    docstring's citations local to it (so that two pages may both cite
    [Gal2016]), so a citation of an entry defined elsewhere would dangle; this
    appends the entry to the docstring's own "References" section instead, so
    that every page lists the works it cites. A label defined nowhere is left
    alone, and fails the build.
    """
    _list_uncited_references(lines)
    text = "\n".join(lines)
    defined = {m.group(2) for line in lines if (m := _CITATION_DEF.match(line))}
    missing = [label for label in dict.fromkeys(_CITATION_REF.findall(text)) if label not in defined]
    if not missing:
        return
    sources = []
    qualname = getattr(obj, "__qualname__", "")
    module = sys.modules.get(getattr(obj, "__module__", None) or "")
    if "." in qualname and module is not None:  # a method: its class's docstring
        owner = module
        for part in qualname.split(".")[:-1]:
            owner = getattr(owner, part, None)
        sources.append(getattr(owner, "__doc__", None))
    if module is not None:
        sources.append(module.__doc__)
    found = {}
    for source in sources:
        for label, entry in _citation_definitions(source).items():
            found.setdefault(label, entry)
    entries = [found[label] for label in missing if label in found]
    if not entries:
        return
    if not any(line.strip() == "References" for line in lines):
        lines.extend(["", "References", "----------"])
    index = next(i for i, line in enumerate(lines) if line.strip() == "References") + 2
    while index < len(lines) and not (
        index + 1 < len(lines) and set(lines[index + 1].strip()) == {"-"} and lines[index].strip()
    ):
        index += 1
    for entry in entries:
        lines[index:index] = entry
        index += len(entry)


_MANGLED_CITATION = re.compile(r"^\[R[0-9a-f]+-(.+)\]$")


def _relabel_summary_citations(app, doctree):
    """Show ``[RW2006]``, not numpydoc's ``[R1a2b...-RW2006]``, in the summary tables.

    numpydoc restores the labels of the citations on the page of the docstring
    that defines them; a summary line copied into an autosummary table (the
    API page, a module's page) cites the same entry from another page.
    """
    from docutils import nodes
    from sphinx.addnodes import pending_xref

    for node in doctree.findall(pending_xref):
        if node.get("refdomain") == "citation" and (match := _MANGLED_CITATION.match(node.astext())):
            node.replace(node[0], nodes.Text(f"[{match.group(1)}]"))


def _import_dotted(dotted):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            obj = inspect.getattr_static(obj, part) if inspect.isclass(obj) else getattr(obj, part)
            if isinstance(obj, (staticmethod, classmethod)):
                obj = obj.__func__
        return obj
    raise ImportError(dotted)


def setup(app):
    app.connect("autodoc-skip-member", _skip_member)
    app.connect("missing-reference", _resolve_alias)
    app.connect("doctree-read", _relabel_summary_citations)
    # Before numpydoc (priority 500) renames the citations of each docstring.
    app.connect("autodoc-process-docstring", _drop_torch_docstrings, priority=390)
    app.connect("autodoc-process-docstring", _constant_docstring, priority=390)
    app.connect("autodoc-process-docstring", _add_cited_references, priority=400)


# -- MyST (the Markdown user guide) ------------------------------------------

myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
myst_dmath_double_inline = True

# -- sphinx-gallery ----------------------------------------------------------

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    # Only examples/plot_*.py make the gallery, each executed at build time;
    # the longer scripts beside them and examples/benchmarks/ (a folder with no
    # GALLERY_HEADER/README, which sphinx-gallery skips) are not part of it.
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"^(?!plot_)",
    "image_scrapers": ("matplotlib",),
    "matplotlib_animations": False,
    "reference_url": {"skbayes": None},
    "doc_module": ("skbayes",),
    "backreferences_dir": "generated/backreferences",
    "inspect_global_variables": False,
    "remove_config_comments": True,
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "only_warn_on_example_error": False,
    "min_reported_time": 1,
    # No sg_execution_times page (it loads its table scripts from a CDN).
    "write_computation_times": False,
    "show_memory": False,
    "download_all_examples": False,
    "show_signature": False,
    "within_subsection_order": "FileNameSortKey",
}

# -- HTML --------------------------------------------------------------------

html_theme = "pydata_sphinx_theme"
html_title = f"skbayes {version}"
html_static_path = []
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
html_theme_options = {
    # Offline: no version switcher JSON, no analytics, no icon links fetched.
    "navbar_end": ["theme-switcher", "navbar-icon-links"],
    "icon_links": [],
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_sidebars = {"**": ["sidebar-nav-bs"]}
