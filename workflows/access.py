"""Who is acting, in which workspace, with which role — for the UI, the admin and the API.

A ``Principal`` is resolved once per request (a session user through their Membership, an
API token through its row) and every write checks ``principal.require(role)``. Objects of
another workspace are looked up *within* ``principal.workspace`` only, so they are simply
not found (404), never visible.

A token's principal may carry a verified system actor (a signed claim, ``workflows.claims``):
that is what lets a request touch a reserved workflow key (``workflows.sudo``); it grants no
role of its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import Q
from django.db.models.functions import Now
from django.utils import timezone

from workflows.errors import PermissionDenied
from workflows.models import ApiToken, Membership, Role, Workspace

if TYPE_CHECKING:
    from workflows.sudo import VerifiedActor

LAST_USED_PRECISION = timedelta(minutes=1)
TOKEN_PREFIX = "sbt_"  # noqa: S105 - a public marker, not a secret


@dataclass(frozen=True)
class Principal:
    workspace: Workspace
    role: str
    label: str  # user:alice, token:ci-bot, actor:deployer via token:ci-bot
    system_actor: VerifiedActor | None = None
    token_id: int | None = None  # the API token it came from, if any

    @property
    def credential(self) -> str:
        """A stable name for the credential (``token:7``, ``user:alice``), to count against."""
        return f"token:{self.token_id}" if self.token_id is not None else self.label

    def with_system_actor(self, actor: VerifiedActor) -> Principal:
        """This principal, acting for a verified system actor (same workspace and role)."""
        return dataclasses.replace(self, system_actor=actor, label=f"actor:{actor.name} via {self.label}")

    def can(self, role: str) -> bool:
        return Role.rank(self.role) >= Role.rank(role)

    def require(self, role: str, what: str = "do this") -> None:
        if not self.can(role):
            raise PermissionDenied(f"the {self.role} role cannot {what}; it needs {role} or above")


SESSION_WORKSPACE = "sb_workspace"


def principal_for_session(user: Any, session: Any) -> Principal | None:
    """A browser session's principal: in the workspace the user chose (``switch_workspace``),
    or their first one when none is chosen or the choice is no longer theirs."""
    chosen = session.get(SESSION_WORKSPACE)
    return (chosen and principal_for_user(user, chosen)) or principal_for_user(user)


def user_workspaces(user: Any) -> list[Workspace]:
    """The workspaces a user may switch to (every one, for a superuser)."""
    if getattr(user, "is_superuser", False):
        return list(Workspace.objects.order_by("slug"))
    return list(Workspace.objects.filter(memberships__user=user).order_by("slug"))


def principal_for_user(user: Any, workspace_slug: str | None = None) -> Principal | None:
    """The user's principal in a workspace (their first one by default); superusers act as
    admins in every workspace."""
    if not getattr(user, "is_authenticated", False):
        return None
    memberships = Membership.objects.filter(user=user).select_related("workspace").order_by("workspace__slug")
    if workspace_slug:
        memberships = memberships.filter(workspace__slug=workspace_slug)
    membership = memberships.first()
    if membership is not None:
        return Principal(membership.workspace, membership.role, f"user:{user.get_username()}")
    if user.is_superuser:
        workspace = Workspace.objects.filter(slug=workspace_slug or "default").first()
        if workspace is not None:
            return Principal(workspace, Role.ADMIN, f"user:{user.get_username()}")
    return None


def workspace_roles(user: Any) -> dict[int, str] | None:
    """The user's role per workspace id (their memberships); ``None`` for a superuser, who is an
    admin everywhere (reserved workflows stay read-only for them too)."""
    if getattr(user, "is_superuser", False):
        return None
    if not getattr(user, "is_authenticated", False):
        return {}
    return dict(Membership.objects.filter(user=user).values_list("workspace_id", "role"))


def hash_token(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(workspace: Workspace, *, name: str, role: str, created_by: str = "",
                 expires_in: timedelta | None = None) -> tuple[ApiToken, str]:
    """Create a token (valid for ``expires_in`` from now on the database clock, or until
    revoked); returns it with its secret, which is never stored and shown only now."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(workspace=workspace, name=name, role=Role(role), prefix=secret[:12],
                                    key_hash=hash_token(secret), created_by=created_by,
                                    expires_at=None if expires_in is None else Now() + expires_in)
    token.refresh_from_db(fields=["expires_at"])
    return token, secret


def principal_for_token(secret: str) -> Principal | None:
    """The principal of an active token: not revoked, not expired (on the database clock)."""
    token = (ApiToken.objects.select_related("workspace")
             .filter(key_hash=hash_token(secret), revoked_at__isnull=True)
             .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=Now())).first())
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_PRECISION:
        # At most one write a minute per token (a guarded update, so racing requests write once).
        ApiToken.objects.filter(pk=token.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - LAST_USED_PRECISION)).update(last_used_at=now)
    return Principal(token.workspace, token.role, f"token:{token.name}", token_id=token.pk)


def revoke_token(token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
