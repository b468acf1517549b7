"""Operator UI routes (HTMX, server-rendered)."""

from django.urls import path  # noqa: F401 - routes are added by the UI module

app_name = "ui"
urlpatterns: list = []
