"""The django-q2 admin, read-only (imported by ``workflows.admin``).

django-q2's own admin lets a superuser schedule any importable function and resubmit any
task — arbitrary code in the worker, which a superuser must not have (docs/security.md: a
superuser cannot become a system actor). Its registrations are replaced here by read-only
lists: schedules, successes, failures and the ORM queue can be inspected, never created,
changed, deleted or resubmitted. Schedules, when a deployment needs one, are created in
code (a data migration or ``django_q.tasks.schedule`` in a management command).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Model
from django.http import HttpRequest
from django.template.defaultfilters import truncatechars
from django_q.models import Failure, OrmQ, Schedule, Success


class ReadOnlyQueueAdmin(admin.ModelAdmin):
    """Superusers may look; nobody may add, change, delete or run anything from here."""

    actions = None

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_superuser)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ScheduleAdmin(ReadOnlyQueueAdmin):
    list_display = ("id", "name", "func", "schedule_type", "repeats", "cluster", "next_run")
    list_filter = ("schedule_type", "cluster")
    search_fields = ("name", "func")


class SuccessAdmin(ReadOnlyQueueAdmin):
    list_display: tuple[str, ...] = ("name", "group", "func", "cluster", "started", "stopped")
    list_filter = ("group", "cluster")
    search_fields = ("name", "func", "group")


class FailureAdmin(SuccessAdmin):
    list_display = ("name", "group", "func", "cluster", "started", "stopped", "short_result")

    @admin.display(description="result")
    def short_result(self, obj: Failure) -> str:
        return truncatechars(obj.result, 100)


class QueuedAdmin(ReadOnlyQueueAdmin):
    list_display = ("id", "key", "name", "func", "lock", "task_id")
    list_filter = ("key",)


REPLACEMENTS: dict[type[Model], type[admin.ModelAdmin]] = {
    Schedule: ScheduleAdmin, Success: SuccessAdmin, Failure: FailureAdmin, OrmQ: QueuedAdmin,
}


def replace_registrations(site: admin.AdminSite) -> None:
    """Swap django-q2's admin classes on ``site`` for the read-only ones above."""
    for model, model_admin in REPLACEMENTS.items():
        if site.is_registered(model):
            site.unregister(model)
        site.register(model, model_admin)
