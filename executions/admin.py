"""Django admin for schedules: authors create, pause, change and delete them in their
workspaces (roles as in workflows/admin.py: viewers read). Every write goes through
executions/services/schedules.py, audited like the API's; the form shows that module's messages on
their fields. Schedules of reserved workflows (S15) are read-only here: a system actor manages
them through the API with a signed claim."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.utils.html import format_html

from executions.models import Schedule
from executions.services import schedules
from workflows import sudo
from workflows.admin import WORKSPACE_FILTER, RoleAdmin
from workflows.audit import audited
from workflows.errors import ServiceError
from workflows.models import Role, WorkflowDefinition


class ScheduleForm(forms.ModelForm):
    input = forms.CharField(widget=forms.Textarea(attrs={"rows": 6, "cols": 80, "style": "font-family: monospace"}),
                            initial="{}", help_text="JSON: each execution starts with this input.")

    class Meta:
        model = Schedule
        fields = ["workspace", "name", "workflow", "cron", "timezone", "input", "catch_up", "enabled"]
        help_texts = {name: schedules.RULES[name].capitalize() + "." for name in
                      ("name", "cron", "timezone", "catch_up", "enabled")}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk is not None:
            self.initial["input"] = json.dumps(self.instance.input, indent=2)

    def clean_input(self) -> Any:
        try:
            return json.loads(self.cleaned_data["input"])
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"Not JSON: {error.msg} at line {error.lineno}, column {error.colno}.") \
                from error

    def clean(self) -> dict[str, Any]:
        """The service's rules, each message on its field; a workflow of another workspace or a
        reserved one is refused here too."""
        cleaned = super().clean() or {}
        values = {field: cleaned[field] for field in ("name", "cron", "timezone", "input", "catch_up", "enabled")
                  if field in cleaned}
        try:
            cleaned.update(schedules.validated(values))
        except ServiceError as invalid:
            for error in invalid.errors:
                self.add_error(error["field"] if error["field"] in self.fields else None, error["message"])
        workflow, workspace = cleaned.get("workflow"), cleaned.get("workspace")
        if workflow is not None and workspace is not None and workflow.workspace_id != workspace.pk:
            self.add_error("workflow", "must be a workflow of the schedule's workspace")
        if workflow is not None and sudo.is_reserved(workflow.key):
            try:
                sudo.require(workflow.key, None, "scheduling")
            except sudo.ReservedKeyDenied as refusal:
                self.add_error("workflow", refusal.message)
        return cleaned


@admin.register(Schedule)
class ScheduleAdmin(RoleAdmin):
    form = ScheduleForm
    list_display = ["name", "workspace", "workflow", "cron", "timezone", "enabled", "next_run_at", "last_run_at",
                    "last_error_short"]
    list_filter = [WORKSPACE_FILTER, "enabled"]
    search_fields = ["name", "workflow__key"]
    list_select_related = ["workspace", "workflow"]
    add_role = change_role = delete_role = Role.AUTHOR
    readonly_fields = ("next_run_at", "last_run_at", "last_execution_id", "last_error", "system_actor",
                       "created_by", "created_at", "updated_at")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # A schedule keeps its workspace, name and workflow (executions' keys carry its name).
        # Before it exists, its bookkeeping has no value to show (only a database default).
        return ("workspace", "name", "workflow", *self.readonly_fields) if obj else ()

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and sudo.is_reserved(obj.workflow.key):
            return False  # S15: only a system actor, through the API
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        if obj is not None and sudo.is_reserved(obj.workflow.key):
            return False
        return super().has_delete_permission(request, obj)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "workflow":
            allowed = self.workspaces_with(request, Role.AUTHOR)
            definitions = WorkflowDefinition.objects.order_by("key")
            kwargs["queryset"] = definitions if allowed is None else definitions.filter(workspace__in=allowed)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    @admin.display(description="last error")
    def last_error_short(self, obj: Schedule) -> str:
        return format_html("<span title='{}'>{}</span>", obj.last_error, obj.last_error[:60]) if obj.last_error else "—"

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        principal = self.principal(request, obj.workspace)
        data = {field: form.cleaned_data[field] for field in schedules.EDITABLE if field in form.cleaned_data}
        action = "schedule.update" if change else "schedule.create"
        with audited(principal, action, target=obj.name, detail={"via": "admin"}):
            principal.require(Role.AUTHOR, "change schedules" if change else "create schedules")
            if change:
                saved = schedules.update_schedule(Schedule.objects.get(pk=obj.pk), **data)
            else:
                saved = schedules.create_schedule(obj.workspace, name=obj.name, workflow=obj.workflow.key,
                                                  by=principal.label, **data)
        obj.pk = saved.pk
        obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Schedule) -> None:
        principal = self.principal(request, obj.workspace)
        with audited(principal, "schedule.delete", target=obj.name, detail={"via": "admin"}):
            principal.require(Role.AUTHOR, "delete schedules")
            schedules.delete_schedule(obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for schedule in queryset:
            self.delete_model(request, schedule)
