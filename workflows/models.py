"""Workspaces, plans, and workflow definitions with their immutable, content-addressed
versions (S14)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    """Least privilege first: each role includes the powers of the ones above it."""

    VIEWER = "viewer", "Viewer"  # read everything in the workspace
    OPERATOR = "operator", "Operator"  # + start, retry, cancel, edit limits
    AUTHOR = "author", "Author"  # + publish workflow versions
    ADMIN = "admin", "Admin"  # + manage tokens and members

    @classmethod
    def rank(cls, role: str) -> int:
        return [cls.VIEWER, cls.OPERATOR, cls.AUTHOR, cls.ADMIN].index(cls(role))


class Plan(models.Model):
    name = models.CharField(max_length=100, unique=True)
    executions_per_day = models.PositiveBigIntegerField(
        help_text="Executions (children of fan-outs included) a workspace may start per UTC day."
    )

    def __str__(self) -> str:
        return f"{self.name} ({self.executions_per_day:,}/day)"


class Workspace(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="workspaces")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "workspace"], name="membership_unique_user_workspace")]

    def __str__(self) -> str:
        return f"{self.user} in {self.workspace} as {self.role}"


class WorkflowDefinition(models.Model):
    """A logical workflow (``ledger-migration``) whose *current* version moves on publish."""

    workspace = models.ForeignKey(Workspace, on_delete=models.PROTECT, related_name="definitions")
    key = models.CharField(max_length=128)
    current_version = models.ForeignKey(
        "WorkflowVersion", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "key"], name="definition_unique_key")]
        ordering = ["key"]

    def __str__(self) -> str:
        return self.key


class WorkflowVersion(models.Model):
    """One immutable version: id = SHA-256 of the canonical DSL. A database trigger refuses
    every UPDATE of these rows (migration 0002)."""

    definition = models.ForeignKey(WorkflowDefinition, on_delete=models.PROTECT, related_name="versions")
    hash = models.CharField(max_length=64, db_index=True)
    canonical = models.TextField(help_text="RFC 8785 canonical JSON of the normalised DSL.")
    dsl = models.JSONField(help_text="The normalised DSL (the canonical form, parsed).")
    # A label, not a foreign key: versions are immutable and must outlive their authors.
    author = models.CharField(max_length=200, blank=True, help_text="Who published it: user:…, token:… or actor:….")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["definition", "hash"], name="version_unique_hash")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.definition.key}@{self.hash[:12]}"

    @property
    def short_hash(self) -> str:
        return self.hash[:12]
