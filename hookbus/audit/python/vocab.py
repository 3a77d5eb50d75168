"""What agent-authored Python may not call, import or touch, as data: the builtins, modules,
runners and path helpers :mod:`hookbus.audit.python.rules` and
:mod:`hookbus.audit.python.names` look for. The shell's words, and the limits and secret
patterns both languages share, are in :mod:`hookbus.audit.shell.vocab`. Change a list here,
not in the walkers.
"""

from __future__ import annotations

PY_EVALUATORS = frozenset({"eval", "exec", "compile", "execfile", "builtins.eval", "builtins.exec"})
IMPORTERS = frozenset(
    {
        "__import__",
        "builtins.__import__",
        "importlib.import_module",
        "importlib.__import__",
        "imp.load_source",
        "importlib.util.spec_from_file_location",
        "runpy.run_path",
        "runpy.run_module",
    }
)
#: Modules that run code the audit cannot see: native twins of ``os`` and ``subprocess``,
#: deserialisers that build objects (and call them), and modules that run strings as code.
OPAQUE_MODULES = frozenset(
    {
        "ctypes",
        "_ctypes",
        "cffi",
        "marshal",
        "pickle",
        "_pickle",
        "cPickle",
        "dill",
        "shelve",
        "code",
        "codeop",
        "runpy",
        "imp",
        "posix",
        "nt",
        "_posixsubprocess",
        "_winapi",
        "timeit",
        "pydoc",
        "pdb",
        "bdb",
        "cProfile",
        "profile",
        "trace",
        "zipimport",
    }
)
#: Names that reach every loaded module, a frame or the interpreter's hooks by key.
MODULE_TABLES = frozenset(
    {
        "sys.modules",
        "sys._getframe",
        "sys.settrace",
        "sys.setprofile",
        "sys.meta_path",
        "sys.path_hooks",
        "sys.addaudithook",
        "sys.breakpointhook",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "inspect.currentframe",
    }
)
#: Loaders that build arbitrary objects from text (``!!python/object/apply:os.system``).
UNSAFE_LOADERS = frozenset(
    {
        "yaml.load",
        "yaml.load_all",
        "yaml.unsafe_load",
        "yaml.unsafe_load_all",
        "yaml.full_load",
        "yaml.full_load_all",
        "yaml.Loader",
        "yaml.UnsafeLoader",
        "yaml.FullLoader",
        "yaml.CLoader",
        "yaml.CUnsafeLoader",
        "yaml.CFullLoader",
    }
)
#: Getters whose first argument names an attribute: ``methodcaller("system")`` is getattr.
ATTRIBUTE_GETTERS = frozenset(
    {
        "getattr",
        "setattr",
        "delattr",
        "builtins.getattr",
        "operator.methodcaller",
        "operator.attrgetter",
    }
)
#: Names that connect to the host's unix sockets.
UNIX_SOCKETS = frozenset({"socket.AF_UNIX", "socket.socketpair", "asyncio.open_unix_connection"})
#: Encodings a handler may declare: the audit reads the file as UTF-8, Python as declared.
SAFE_ENCODINGS = frozenset({"utf-8", "utf8", "utf_8", "utf-8-sig", "ascii", "us-ascii"})
NAMESPACES = frozenset({"globals", "locals", "vars", "builtins.globals"})
DUNDERS = frozenset(
    {
        "__builtins__",
        "__globals__",
        "__code__",
        "__subclasses__",
        "__dict__",
        "__getattribute__",
        "__bases__",
        "__mro__",
        "__import__",
        "__loader__",
        "__closure__",
        "__call__",
        "__reduce__",
        "__reduce_ex__",
    }
)
SHELL_RUNNERS = frozenset(
    {
        "os.system",
        "os.popen",
        "subprocess.getoutput",
        "subprocess.getstatusoutput",
        "asyncio.create_subprocess_shell",
    }
)
EXEC_RUNNERS = frozenset(
    {
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.Popen",
        "asyncio.create_subprocess_exec",
        "pty.spawn",
    }
)
LOW_LEVEL_PREFIXES = ("os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty")
PATH_WRITERS = frozenset(
    {
        "os.remove",
        "os.unlink",
        "os.rmdir",
        "os.removedirs",
        "os.mkdir",
        "os.makedirs",
        "os.rename",
        "os.renames",
        "os.replace",
        "os.symlink",
        "os.link",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.mkfifo",
        "os.mknod",
        "shutil.copy",
        "shutil.copy2",
        "shutil.copyfile",
        "shutil.copytree",
        "shutil.move",
        "shutil.rmtree",
        "shutil.chown",
    }
)
WRITE_METHODS = frozenset(
    {
        "write_text",
        "write_bytes",
        "touch",
        "mkdir",
        "unlink",
        "rmdir",
        "rename",
        "replace",
        "symlink_to",
        "hardlink_to",
        "chmod",
    }
)
OPENERS = frozenset({"open", "io.open", "codecs.open", "builtins.open"})
PATH_BUILDERS = frozenset(
    {
        "os.path.join",
        "pathlib.Path",
        "pathlib.PurePath",
        "os.path.dirname",
        "os.path.abspath",
        "os.path.realpath",
        "os.path.normpath",
        "os.fspath",
        "str",
    }
)
PATH_METHODS = frozenset({"joinpath", "resolve", "absolute", "with_suffix", "with_name"})
HOOK_DIR_GETTERS = frozenset({"os.environ.get", "os.getenv"})
CWD = frozenset({"os.getcwd", "pathlib.Path.cwd"})
ENVIRONS = frozenset({"os.environ", "os.environb", "posix.environ"})
#: Attribute names that reach a code runner: ``getattr(builtins, "eval")`` is ``eval``.
RISKY_ATTRIBUTES = frozenset(
    {
        "eval",
        "exec",
        "compile",
        "system",
        "popen",
        "execv",
        "execve",
        "execvp",
        "execl",
        "execlp",
        "spawnv",
        "spawnl",
        "posix_spawn",
        "fork",
        "import_module",
        "run",
        "call",
        "Popen",
        "check_output",
        "check_call",
        "getoutput",
        "loads",
    }
)
