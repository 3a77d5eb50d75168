"""The security audit of hook folders, and the autonomy policy it enforces.

``audit_folder`` is re-exported lazily so that importing this package costs nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["audit_folder"]

if TYPE_CHECKING:
    from hookbus.audit.folder import audit_folder


def __getattr__(name: str) -> Any:
    if name != "audit_folder":
        raise AttributeError(f"module 'hookbus.audit' has no attribute {name!r}")
    from hookbus.audit.folder import audit_folder

    globals()[name] = audit_folder
    return audit_folder
