from django.contrib import admin
from django.http import HttpRequest, JsonResponse
from django.urls import path

from executions import demo


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("healthz", healthz, name="healthz"),
    path("demo/ledger/entries", demo.ledger_entries_view, name="demo-ledger-entries"),
]
