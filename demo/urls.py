"""The demo's routes, under ``/demo/`` (included only with ``SB_DEMO=1``)."""

from django.urls import path

from demo import views

app_name = "demo"

urlpatterns = [
    path("ledger/entries", views.ledger_entries, name="ledger-entries"),
    path("ledger-health", views.ledger_health, name="ledger-health"),
]
