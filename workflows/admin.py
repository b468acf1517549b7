"""Django admin for workflow authors: definitions (publish a new version from a JSON
textarea, errors inline with their JSON paths) and read-only, immutable versions.

Roles, as in the API and UI: a staff user acts in each workspace with their Membership's
role (superusers as admins everywhere) and sees only the workspaces they belong to.
Viewers read definitions and versions; authors also publish; admins also see and revoke
tokens, manage members and read the audit log. Workspaces, plans and system actors are for
superusers. Reserved definitions (``system.*``, S15) are read-only for everyone, superusers
included: system actors publish them through the API with a signed claim.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html

from workflows import actors, dsl, queue_admin, selectors, signing, sudo
from workflows.access import Principal, revoke_token, workspace_roles
from workflows.audit import audited, record
from workflows.dsl.parser import WORKFLOW_KEY
from workflows.logins import AdminLoginForm
from workflows.models import (
    ApiToken,
    AuditEvent,
    Membership,
    Plan,
    Role,
    SystemActor,
    WorkflowDefinition,
    WorkflowVersion,
    Workspace,
)
from workflows.services import publish_version, validate

WORKSPACE_FILTER = ("workspace", admin.RelatedOnlyFieldListFilter)


def _label(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


class RoleAdmin(admin.ModelAdmin):
    """Permissions from workspace roles instead of Django's model permissions. ``None`` as a
    role means nobody may (e.g. versions are never changed)."""

    workspace_path = "workspace"  # ORM path from the model to its workspace
    view_role: str | None = Role.VIEWER
    add_role: str | None = None
    change_role: str | None = None
    delete_role: str | None = None

    def workspace_id_of(self, obj: Any) -> int | None:
        return obj.workspace_id

    def role_in(self, request: HttpRequest, workspace_id: int | None) -> str | None:
        roles = _roles(request)
        if roles is None:
            return Role.ADMIN
        return roles.get(workspace_id) if workspace_id is not None else None

    def workspaces_with(self, request: HttpRequest, role: str) -> list[int] | None:
        """Ids of the workspaces where the user has at least ``role``; ``None`` means all."""
        roles = _roles(request)
        if roles is None:
            return None
        return [workspace for workspace, held in roles.items() if Role.rank(held) >= Role.rank(role)]

    def may(self, request: HttpRequest, role: str | None, obj: Any = None) -> bool:
        if role is None or not (request.user.is_active and request.user.is_staff):
            return False
        if obj is None:
            allowed = self.workspaces_with(request, role)
            return allowed is None or bool(allowed)
        held = self.role_in(request, self.workspace_id_of(obj))
        return held is not None and Role.rank(held) >= Role.rank(role)

    def principal(self, request: HttpRequest, workspace: Workspace) -> Principal:
        return Principal(workspace, self.role_in(request, workspace.pk) or Role.VIEWER, _label(request))

    def has_module_permission(self, request: HttpRequest) -> bool:
        return self.may(request, self.view_role)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.may(request, self.view_role, obj) or self.has_change_permission(request, obj)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.may(request, self.add_role)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.may(request, self.change_role, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.may(request, self.delete_role, obj)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset = super().get_queryset(request)
        allowed = self.workspaces_with(request, self.view_role or Role.ADMIN)
        return queryset if allowed is None else queryset.filter(**{f"{self.workspace_path}__in": allowed})

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "workspace":
            allowed = self.workspaces_with(request, self.add_role or self.change_role or Role.ADMIN)
            if allowed is not None:
                kwargs["queryset"] = Workspace.objects.filter(pk__in=allowed)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class SuperuserAdmin(admin.ModelAdmin):
    """Platform-wide objects: superusers only."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)


def _roles(request: HttpRequest) -> dict[int, str] | None:
    if not hasattr(request, "_sb_roles"):
        request._sb_roles = workspace_roles(request.user)  # type: ignore[attr-defined]  # once per request
    return request._sb_roles  # type: ignore[attr-defined]  # set just above


# --- definitions and versions ---------------------------------------------------------------------

class DefinitionForm(forms.ModelForm):
    dsl = forms.CharField(
        label="Publish a new version (DSL JSON)",
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "style": "font-family: monospace",
                                     "spellcheck": "false"}),
        required=False,
        help_text="The current version, to edit (or paste a workflow document). Saving validates it, "
                  "stores it as an immutable version (its id is the SHA-256 of its canonical form) and "
                  "makes it current.",
    )
    actor_label = ""  # set by WorkflowDefinitionAdmin.get_form: who is publishing, for the audit log

    class Meta:
        model = WorkflowDefinition
        fields = ["workspace", "key"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        current = getattr(self.instance, "current_version", None) if self.instance.pk else None
        if current is not None and not self.is_bound:
            # Start from the current version: an author edits it rather than retyping it (saving
            # it unchanged publishes nothing new: the same hash is the same version).
            self.initial["dsl"] = json.dumps(json.loads(current.canonical), indent=2)

    def clean_dsl(self) -> Any:
        text = self.cleaned_data.get("dsl", "").strip()
        if not text:
            if self.instance.pk is None:
                raise forms.ValidationError("A new definition needs its first version.")
            return None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not JSON: {error.msg} at line {error.lineno}, column {error.colno}.") \
                from error
        try:
            validate(doc)
        except dsl.DslError as error:
            raise forms.ValidationError([f"{path}: {message}" for path, message in error.errors]) from error
        return doc

    def clean(self) -> dict[str, Any]:
        """Refuse a reserved key with the reason; record every refused publish."""
        cleaned = super().clean() or {}
        key = cleaned.get("key") or self.instance.key
        workspace = cleaned.get("workspace") or getattr(self.instance, "workspace", None)
        if key and not WORKFLOW_KEY.fullmatch(key):
            self.add_error("key", "a workflow key is 1-128 letters, digits, '.', '_' or '-', starting with a letter "
                                  "or digit")
        elif key and sudo.is_reserved(key):
            try:
                sudo.require(key, None, "publishing to")
            except sudo.ReservedKeyDenied as refusal:
                self.add_error(None, refusal.message)
        problems = [str(message) for field in ("__all__", "key", "dsl") for message in self.errors.get(field, [])]
        if problems and key and workspace is not None:
            record(self.actor_label, "workflow.publish", workspace=workspace, target=key,
                   outcome=AuditEvent.Outcome.REFUSED, reason="; ".join(problems), detail={"via": "admin"})
        return cleaned


class VersionInline(admin.TabularInline):
    model = WorkflowVersion
    readonly_fields = ("version_link", "author", "created_at")
    fields = readonly_fields
    extra = 0
    can_delete = False
    show_change_link = False
    ordering = ["-created_at", "-id"]

    # Whoever may see the definition sees its versions; nobody edits them here.
    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="version")
    def version_link(self, version: WorkflowVersion) -> str:
        url = reverse("admin:workflows_workflowversion_change", args=[version.pk])
        return format_html('<a href="{}"><code>{}</code></a>', url, version.hash)


@admin.register(WorkflowDefinition)
class WorkflowDefinitionAdmin(RoleAdmin):
    form = DefinitionForm
    list_display = ["key", "workspace", "current_hash", "reserved", "updated_at"]
    list_filter = [WORKSPACE_FILTER]
    search_fields = ["key", "current_version__hash"]
    list_select_related = ["workspace", "current_version"]
    add_role = change_role = Role.AUTHOR

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and sudo.is_reserved(obj.key):
            return False  # S15: read-only for everyone; see reserved_notice
        return super().has_change_permission(request, obj)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "",
                    extra_context: dict[str, Any] | None = None) -> HttpResponse:
        """A POST to a reserved definition (its page has no form: a forged or stale request) is
        refused like any publish to it: audited, with the reason."""
        obj = self.get_object(request, unquote(object_id)) if request.method == "POST" else None
        if obj is not None and sudo.is_reserved(obj.key):
            try:
                sudo.require(obj.key, None, "publishing to")
            except sudo.ReservedKeyDenied as refusal:
                record(_label(request), "workflow.publish", workspace=obj.workspace, target=obj.key,
                       outcome=AuditEvent.Outcome.REFUSED, reason=refusal.message, detail={"via": "admin"})
                raise DjangoPermissionDenied(refusal.message) from refusal
        return super().change_view(request, object_id, form_url, extra_context)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        # A fresh class per call (modelform_factory), so nothing leaks between requests.
        form.actor_label = _label(request)  # type: ignore[attr-defined]  # DefinitionForm declares it
        return form

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        return ("workspace", "key", "current_hash", "reserved_notice") if obj else ()

    def get_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        if obj is None:
            return ("workspace", "key", "dsl")
        if sudo.is_reserved(obj.key):
            return ("workspace", "key", "current_hash", "reserved_notice")
        editable = self.has_change_permission(request, obj)
        return ("workspace", "key", "current_hash", *(("dsl",) if editable else ()))

    @admin.display(description="current version")
    def current_hash(self, obj: WorkflowDefinition) -> str:
        if obj.current_version is None:
            return "—"
        return format_html("<code>{}</code>", obj.current_version.hash[:12])

    @admin.display(description="reserved", boolean=True)
    def reserved(self, obj: WorkflowDefinition) -> bool:
        return sudo.is_reserved(obj.key)

    @admin.display(description="read-only")
    def reserved_notice(self, obj: WorkflowDefinition) -> str:
        try:
            sudo.require(obj.key, None, "publishing to")
        except sudo.ReservedKeyDenied as refusal:
            return str(refusal.message)
        return "—"

    def save_model(self, request: HttpRequest, obj: WorkflowDefinition, form: Any, change: bool) -> None:
        doc = form.cleaned_data.get("dsl")
        if doc is None:
            return
        principal = self.principal(request, obj.workspace)
        with audited(principal, "workflow.publish", target=obj.key, detail={"via": "admin"}):
            principal.require(Role.AUTHOR, "publish workflow versions")
            published = publish_version(obj.workspace, obj.key, doc, author=principal.label)
        obj.pk = published.version.definition_id
        obj.refresh_from_db()
        verb = "Published new version" if published.created else "Version already existed; made current:"
        self.message_user(request, f"{verb} {published.version.hash[:12]}")

    def get_inlines(self, request: HttpRequest, obj: Any) -> list[type[admin.options.InlineModelAdmin[Any, Any]]]:
        return [VersionInline] if obj is not None else []  # a new definition has no versions yet

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        # Versions are written only by publish_version: the read-only inline saves nothing (and
        # says so, for the change message).
        for formset in formsets:
            formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []


@admin.register(WorkflowVersion)
class WorkflowVersionAdmin(RoleAdmin):
    list_display = ["short", "definition", "author", "created_at"]
    list_filter = [("definition__workspace", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["hash", "definition__key"]
    readonly_fields = ("definition", "hash", "author", "created_at", "pretty_dsl", "diff")
    fields = readonly_fields
    list_select_related = ["definition"]
    workspace_path = "definition__workspace"

    def workspace_id_of(self, obj: Any) -> int | None:
        return obj.definition.workspace_id

    @admin.display(description="version")
    def short(self, obj: WorkflowVersion) -> str:
        return format_html("<code>{}</code>", obj.hash[:12])

    @admin.display(description="canonical DSL")
    def pretty_dsl(self, obj: WorkflowVersion) -> str:
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", selectors.pretty_canonical(obj))

    @admin.display(description="diff against the previous version")
    def diff(self, obj: WorkflowVersion) -> str:
        text = selectors.version_diff(obj)
        return format_html("<pre style='white-space: pre-wrap'>{}</pre>", text or "(first version)")


# --- workspaces, members, tokens -------------------------------------------------------------------

@admin.register(Workspace)
class WorkspaceAdmin(SuperuserAdmin):
    list_display = ["slug", "name", "plan", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(Plan)
class PlanAdmin(SuperuserAdmin):
    list_display = ["name", "executions_per_day"]


@admin.register(Membership)
class MembershipAdmin(RoleAdmin):
    list_display = ["user", "workspace", "role"]
    list_filter = [WORKSPACE_FILTER, "role"]
    view_role = add_role = change_role = delete_role = Role.ADMIN

    def save_model(self, request: HttpRequest, obj: Membership, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        record(_label(request), "member.change" if change else "member.add", workspace=obj.workspace,
               target=obj.user.get_username(), detail={"role": obj.role})

    def delete_model(self, request: HttpRequest, obj: Membership) -> None:
        record(_label(request), "member.remove", workspace=obj.workspace, target=obj.user.get_username(),
               detail={"role": obj.role})
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for membership in queryset.select_related("user", "workspace"):
            self.delete_model(request, membership)


@admin.register(ApiToken)
class ApiTokenAdmin(RoleAdmin):
    """Tokens are created with ``manage.py sb_token create`` (the secret is shown once)."""

    list_display = ["name", "workspace", "role", "prefix", "created_at", "last_used_at", "expires_at", "revoked_at"]
    list_filter = [WORKSPACE_FILTER, "role"]
    readonly_fields = ("workspace", "name", "role", "prefix", "created_by", "created_at", "last_used_at",
                       "expires_at", "revoked_at")
    fields = readonly_fields
    actions = ["revoke"]
    view_role = Role.ADMIN

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return self.may(request, Role.ADMIN)

    @admin.action(description="Revoke selected tokens", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        for token in queryset:  # already limited to the workspaces this user administers
            revoke_token(token)
            record(_label(request), "token.revoke", workspace=token.workspace, target=token.name)


# --- system actors and the audit log ---------------------------------------------------------------

@admin.register(SystemActor)
class SystemActorAdmin(SuperuserAdmin):
    """Registered with ``manage.py sb_actor`` (only public keys reach the server); here they
    can be listed and deactivated, never edited."""

    list_display = ["name", "active", "key", "pattern_list", "created_by", "created_at", "deactivated_at"]
    list_filter = ["active"]
    search_fields = ["name"]
    readonly_fields = ("name", "active", "key", "pattern_list", "public_key", "created_by", "created_at",
                       "deactivated_at")
    fields = readonly_fields
    actions = ["deactivate"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_deactivate_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    @admin.display(description="key")
    def key(self, obj: SystemActor) -> str:
        return signing.fingerprint(obj.public_key)

    @admin.display(description="patterns")
    def pattern_list(self, obj: SystemActor) -> str:
        return ", ".join(obj.patterns)

    @admin.action(description="Deactivate selected actors (for good)", permissions=["deactivate"])
    def deactivate(self, request: HttpRequest, queryset: Any) -> None:
        done = sum(actors.deactivate(actor, by=_label(request)) for actor in queryset)
        self.message_user(request, f"Deactivated {done} system actor key(s).")


@admin.register(AuditEvent)
class AuditEventAdmin(RoleAdmin):
    list_display = ["created_at", "actor", "action", "target", "outcome", "reason", "workspace"]
    list_filter = ["outcome", "action", WORKSPACE_FILTER, ("created_at", admin.DateFieldListFilter)]
    search_fields = ["actor", "action", "target", "reason"]
    date_hierarchy = "created_at"
    view_role = Role.ADMIN  # rows without a workspace (commands, claims without one) are for superusers


queue_admin.replace_registrations(admin.site)
admin.site.login_form = AdminLoginForm  # failed admin logins are throttled like the UI's
