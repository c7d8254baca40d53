"""memsync's record classes: `@recordclass` declares one as `dataclasses.dataclass` does, cheap to define.

Every command imports most of memsync's ~100 record types and builds a handful of them. The
standard `dataclass` compiles `__init__`, `__repr__` and `__eq__` (and, when frozen,
`__setattr__`, `__delattr__` and `__hash__`) as each class is created, a real share of a cold
`status` or push (docs/PERFORMANCE.md "The cold path"). Here a class costs next to nothing to
define:

- `__init__` is generic for a class's first few instances and compiled after them, so a class
  built in bulk runs exactly as fast as with the standard one and a class no command builds
  never pays for it;
- `__repr__`, `__eq__`, `__hash__` and frozen records' refusal of assignment are shared
  functions that read the field list.

The subset memsync uses is supported: `frozen`, `slots`, `field(default=..., default_factory=...,
repr=..., compare=...)`, inherited fields, `__post_init__`, `ClassVar` annotations left out. `fields`,
`asdict` and `replace` work as their `dataclasses` namesakes. Type checkers read the decorator
through `dataclass_transform` (PEP 681) and check it as a dataclass.

msgspec's `Struct` was measured as the library alternative: its import alone costs about half of
what it would save, and its classes are not plain Python classes (figures: docs/PERFORMANCE.md,
"Figures behind the code's speed mechanisms").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda decorated: decorated

T = TypeVar("T")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenInstanceError(AttributeError):
    """An assignment to a field of a frozen record."""


class Field:
    """One field of a record: its name, default or default factory, and whether repr and == see it."""

    __slots__ = ("compare", "default", "default_factory", "name", "repr")

    def __init__(self, default: Any = MISSING, default_factory: Any = MISSING, repr: bool = True,
                 compare: bool = True) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default = default
        self.default_factory = default_factory
        self.repr = repr
        self.compare = compare

    @property
    def required(self) -> bool:
        return self.default is MISSING and self.default_factory is MISSING

    def __repr__(self) -> str:
        return f"Field(name={self.name!r}, default={self.default!r}, default_factory={self.default_factory!r})"


def field(*, default: Any = MISSING, default_factory: Any = MISSING, repr: bool = True,
          compare: bool = True) -> Any:
    """A field with a default, a default factory, or left out of repr or ==."""
    return Field(default, default_factory, repr, compare)


def _is_classvar(annotation: Any) -> bool:
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__origin__", annotation)
    if isinstance(text, str):
        return text.startswith(("ClassVar", "typing.ClassVar"))
    return repr(text).startswith("typing.ClassVar")


def _collect(cls: type) -> tuple[Field, ...]:
    found: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for inherited in base.__dict__.get("__record_fields__", ()):
            found[inherited.name] = inherited
    # the class's own annotations only (inspect.get_annotations would import inspect)
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():  # noqa: RUF063
        if _is_classvar(annotation):
            continue
        value = cls.__dict__.get(name, MISSING)
        made = value if isinstance(value, Field) else Field(default=value)
        made.name = name
        if isinstance(made.default, (list, dict, set)):
            raise ValueError(f"mutable default {type(made.default).__name__} for field {name} "
                             "is not allowed: use default_factory")
        found[name] = made
    seen_default = False
    for made in found.values():
        if not made.required:
            seen_default = True
        elif seen_default:
            raise TypeError(f"non-default argument {made.name!r} follows default argument")
    return tuple(found.values())


def _compile_init(owner: type) -> Callable[..., None]:
    """The owner's `__init__`, written out like the standard dataclass's: run once per class."""
    names: dict[str, Any] = {"_MISSING": MISSING, "_set": object.__setattr__}
    params, body = [], []
    frozen = owner.__dict__.get("__record_frozen__", False)
    for made in owner.__dict__["__record_fields__"]:
        name = made.name
        if made.default is not MISSING:
            names[f"_d_{name}"] = made.default
            params.append(f"{name}=_d_{name}")
        elif made.default_factory is not MISSING:
            names[f"_f_{name}"] = made.default_factory
            params.append(f"{name}=_MISSING")
            body.append(f"  if {name} is _MISSING: {name} = _f_{name}()")
        else:
            params.append(name)
        body.append(f"  _set(self, {name!r}, {name})" if frozen else f"  self.{name} = {name}")
    if hasattr(owner, "__post_init__"):
        body.append("  self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "  pass") + "\n"
    made_here: dict[str, Any] = {}
    exec(source, names, made_here)
    init: Callable[..., None] = made_here["__init__"]
    init.__qualname__ = f"{owner.__qualname__}.__init__"
    return init


_COMPILE_AFTER = 8  # instances built by the generic __init__ before the class gets its own


def _bootstrap_init(owner: type, made: tuple[Field, ...], frozen: bool) -> Callable[..., None]:
    """A generic `__init__` for the first few instances (compiling one is not free, and most
    classes build one or two in a command), then the compiled one, as fast as the standard's."""
    post_init = hasattr(owner, "__post_init__")
    built = [0]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        built[0] += 1
        if built[0] > _COMPILE_AFTER:
            real = _compile_init(owner)
            type.__setattr__(owner, "__init__", real)
            real(self, *args, **kwargs)
            return
        if len(args) > len(made):
            raise TypeError(f"{owner.__qualname__}() takes {len(made)} positional arguments but {len(args)} were given")
        for position, one in enumerate(made):
            if position < len(args):
                if one.name in kwargs:
                    raise TypeError(f"{owner.__qualname__}() got multiple values for argument {one.name!r}")
                value = args[position]
            elif one.name in kwargs:
                value = kwargs.pop(one.name)
            elif one.default is not MISSING:
                value = one.default
            elif one.default_factory is not MISSING:
                value = one.default_factory()
            else:
                raise TypeError(f"{owner.__qualname__}() missing required argument {one.name!r}")
            if frozen:
                object.__setattr__(self, one.name, value)
            else:
                setattr(self, one.name, value)
        if kwargs:
            raise TypeError(f"{owner.__qualname__}() got an unexpected keyword argument {next(iter(kwargs))!r}")
        if post_init:
            self.__post_init__()
    return __init__


def _repr(self: Any) -> str:
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in self.__record_fields__ if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _key(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, f.name) for f in self.__record_fields__ if f.compare)


def _eq(self: Any, other: object) -> Any:
    if other.__class__ is self.__class__:
        return _key(self) == _key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    return hash(_key(self))


def _frozen_setattr(self: Any, name: str, value: Any) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _build(cls: type, frozen: bool, slots: bool) -> type:
    made = _collect(cls)
    for one in made:  # the class attribute holds the plain default, as with dataclasses
        if isinstance(cls.__dict__.get(one.name), Field):
            if one.default is MISSING:
                delattr(cls, one.name)
            else:
                setattr(cls, one.name, one.default)
    if slots:
        namespace = {key: value for key, value in cls.__dict__.items()
                     if key not in ("__dict__", "__weakref__") and key not in {f.name for f in made}}
        namespace["__slots__"] = tuple(f.name for f in made)
        cls = type(cls)(cls.__name__, cls.__bases__, namespace)
    names = tuple(f.name for f in made)
    methods: dict[str, Any] = {"__record_fields__": made, "__record_frozen__": frozen, "__match_args__": names,
                               "__init__": _bootstrap_init(cls, made, frozen)}
    if "__repr__" not in cls.__dict__:
        methods["__repr__"] = _repr
    if "__eq__" not in cls.__dict__:
        methods["__eq__"] = _eq
    if frozen:
        methods["__setattr__"] = _frozen_setattr
        methods["__delattr__"] = _frozen_delattr
        if cls.__dict__.get("__hash__") is None:
            methods["__hash__"] = _hash
    elif "__hash__" not in cls.__dict__:
        methods["__hash__"] = None  # mutable and compared by value: unhashable, as with dataclasses
    for name, value in methods.items():
        type.__setattr__(cls, name, value)
    return cls


@overload
def recordclass(cls: type[T], /) -> type[T]: ...


@overload
def recordclass(*, frozen: bool = False, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(field, Field))
def recordclass(cls: type[T] | None = None, /, *, frozen: bool = False,
              slots: bool = False) -> type[T] | Callable[[type[T]], type[T]]:
    """Make `cls` a record: `@dataclass`, `@dataclass(frozen=True)`, `@dataclass(slots=True)`."""
    if cls is None:
        return lambda inner: _build(inner, frozen, slots)
    return _build(cls, frozen, slots)


def is_recordclass(obj: object) -> bool:
    """Whether `obj` is a record or a record class."""
    return hasattr(obj, "__record_fields__")


def fields(obj: object) -> tuple[Field, ...]:
    """A record's fields, in order; `obj` a record or a record class."""
    try:
        return obj.__record_fields__  # type: ignore[attr-defined, no-any-return]
    except AttributeError:
        raise TypeError("fields() needs a record or a record class") from None


def asdict(obj: Any) -> dict[str, Any]:
    """The record as a dict, records, lists, tuples and dicts inside it converted too."""
    if not is_recordclass(obj) or isinstance(obj, type):
        raise TypeError("asdict() needs a record")
    converted = _plain(obj)
    assert isinstance(converted, dict)
    return converted


def _plain(value: Any) -> Any:
    if is_recordclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in value.__record_fields__}
    if isinstance(value, dict):
        return type(value)((_plain(k), _plain(v)) for k, v in value.items())
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple keeps its type
        return type(value)(*(_plain(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    return value


def replace(obj: T, /, **changes: Any) -> T:
    """A copy of the record with `changes` applied, built through its `__init__`."""
    values = {f.name: getattr(obj, f.name) for f in fields(obj)}
    unknown = set(changes) - set(values)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no field {sorted(unknown)[0]!r}")
    values.update(changes)
    return type(obj)(**values)
