"""Django admin for workflow authors: definitions (publish a new version from a JSON
textarea, errors inline with their JSON paths) and read-only, immutable versions."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from workflows import dsl, selectors
from workflows.access import revoke_token
from workflows.audit import record
from workflows.models import ApiToken, AuditEvent, Membership, Plan, WorkflowDefinition, WorkflowVersion, Workspace
from workflows.services import publish_version, validate


class DefinitionForm(forms.ModelForm):
    dsl = forms.CharField(
        label="Publish a new version (DSL JSON)",
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "style": "font-family: monospace",
                                     "spellcheck": "false"}),
        required=False,
        help_text="Paste a workflow document. Saving validates it, stores it as an immutable version "
                  "(its id is the SHA-256 of its canonical form) and makes it current.",
    )

    class Meta:
        model = WorkflowDefinition
        fields = ["workspace", "key"]

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


class VersionInline(admin.TabularInline):
    model = WorkflowVersion
    fields = ["version_link", "author", "created_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False
    ordering = ["-created_at", "-id"]

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="version")
    def version_link(self, version: WorkflowVersion) -> str:
        url = reverse("admin:workflows_workflowversion_change", args=[version.pk])
        return format_html('<a href="{}"><code>{}</code></a>', url, version.hash)


@admin.register(WorkflowDefinition)
class WorkflowDefinitionAdmin(admin.ModelAdmin):
    form = DefinitionForm
    list_display = ["key", "workspace", "current_hash", "updated_at"]
    list_filter = ["workspace"]
    search_fields = ["key", "current_version__hash"]
    inlines = [VersionInline]
    list_select_related = ["workspace", "current_version"]

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["workspace", "key", "current_hash"] if obj else []

    def get_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return ["workspace", "key", "current_hash", "dsl"] if obj else ["workspace", "key", "dsl"]

    @admin.display(description="current version")
    def current_hash(self, obj: WorkflowDefinition) -> str:
        if obj.current_version is None:
            return "—"
        return format_html("<code>{}</code>", obj.current_version.hash[:12])

    def save_model(self, request: HttpRequest, obj: WorkflowDefinition, form: Any, change: bool) -> None:
        doc = form.cleaned_data.get("dsl")
        if doc is None:
            return
        published = publish_version(obj.workspace, obj.key, doc, author=f"user:{request.user}")
        obj.pk = published.version.definition_id
        obj.refresh_from_db()
        verb = "Published new version" if published.created else "Version already existed; made current:"
        self.message_user(request, f"{verb} {published.version.hash[:12]}")

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        return None  # versions are written only by publish_version


@admin.register(WorkflowVersion)
class WorkflowVersionAdmin(admin.ModelAdmin):
    list_display = ["short", "definition", "author", "created_at"]
    list_filter = ["definition__workspace"]
    search_fields = ["hash", "definition__key"]
    fields = ["definition", "hash", "author", "created_at", "pretty_dsl", "diff"]
    readonly_fields = fields
    list_select_related = ["definition"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

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


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "plan", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ["name", "executions_per_day"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "workspace", "role"]
    list_filter = ["workspace", "role"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created with ``manage.py sb_token create`` (the secret is shown once)."""

    list_display = ["name", "workspace", "role", "prefix", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["workspace", "role"]
    readonly_fields = ["workspace", "name", "role", "prefix", "created_by", "created_at", "last_used_at", "revoked_at"]
    fields = readonly_fields
    actions = ["revoke"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        for token in queryset:
            revoke_token(token)
            record(f"user:{request.user}", "token.revoke", workspace=token.workspace, target=token.name)


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "actor", "action", "target", "outcome", "reason", "workspace"]
    list_filter = ["outcome", "action", "workspace", ("created_at", admin.DateFieldListFilter)]
    search_fields = ["actor", "action", "target", "reason"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
