from django.apps import apps
from django.contrib import admin
from django.contrib.auth.views import LoginView, LogoutView, PasswordChangeDoneView, PasswordChangeView
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from schemabridge_site import probes
from workflows.logins import LoginForm

# The demo ledger and its switch exist only with SB_DEMO=1 (the demo app installed).
demo = [path("demo/", include("demo.urls"))] if apps.is_installed("demo") else []

urlpatterns = [
    path("admin/", admin.site.urls),
    # Before django.contrib.auth's own "login" route: the same view with a throttled form.
    path("accounts/login/", LoginView.as_view(authentication_form=LoginForm), name="login"),
    # No password reset: it would mail a reset link to anyone who asks, unthrottled, and this
    # product sends no mail; an admin sets passwords (docs/security.md, "Logins").
    path("accounts/logout/", LogoutView.as_view(), name="logout"),
    path("accounts/password_change/", PasswordChangeView.as_view(), name="password_change"),
    path("accounts/password_change/done/", PasswordChangeDoneView.as_view(), name="password_change_done"),
    path("healthz", probes.healthz, name="healthz"),
    path("readyz", probes.readyz, name="readyz"),
    path("metrics", probes.metrics_view, name="metrics"),
    *demo,
    path("api/v1/", include("executions.api.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("", include("executions.ui.urls")),
]
