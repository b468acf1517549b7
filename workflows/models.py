"""Workspaces, plans, and workflow definitions with their immutable, content-addressed
versions (S14)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Now


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
    upload_bytes = models.PositiveBigIntegerField(
        default=1024**3,
        help_text="Bytes of uploads a workspace may keep stored at once (until they expire or are deleted); "
                  "uploads share the payload store with every workspace's inputs and outputs.",
    )
    weight = models.PositiveSmallIntegerField(
        default=1, db_default=1,
        help_text="The workspace's share of the workers when several workspaces have work ready: claims are "
                  "divided in proportion to the weights (docs/architecture.md, \"Scheduling\").",
    )

    class Meta:
        constraints = [models.CheckConstraint(condition=models.Q(weight__gte=1), name="plan_weight_positive")]

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


class ApiToken(models.Model):
    """A workspace API token with a role. Only a SHA-256 of the secret is stored; the secret
    is shown once, at creation."""

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="tokens")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    prefix = models.CharField(max_length=12, help_text="The first characters of the token, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True)
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True,
                                        help_text="Updated at most once a minute, so reads stay reads.")
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Refused from then on; empty: never expires.")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.role})"

    @property
    def active(self) -> bool:
        return self.revoked_at is None


class AuditEvent(models.Model):
    """Who did what, accepted or refused, and why. Rows are immutable: a database trigger
    refuses UPDATE and DELETE (migration 0004)."""

    class Outcome(models.TextChoices):
        ACCEPTED = "accepted"
        REFUSED = "refused"

    workspace = models.ForeignKey(Workspace, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    actor = models.CharField(max_length=200, help_text="user:…, token:…, actor:… or system")
    action = models.CharField(max_length=64, db_index=True)
    target = models.CharField(max_length=300, blank=True, default="")
    outcome = models.CharField(max_length=16, choices=Outcome.choices)
    reason = models.TextField(blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(db_default=Now(), db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.actor} {self.action} {self.target} {self.outcome}"


class SystemActor(models.Model):
    """A program that may claim reserved workflow keys (S15, the "sudo" pattern) by signing
    each request with its Ed25519 private key. Only the public key is stored; the private key
    never reaches the server.

    A row is one key: rotating registers a new row under the same name and deactivates the
    old one, so at most one row per name is active (a partial unique index)."""

    name = models.CharField(max_length=100, help_text="Sent as X-SB-Actor; letters, digits, '.', '_' or '-'.")
    public_key = models.CharField(max_length=64, unique=True,
                                  help_text="The raw 32-byte Ed25519 public key, base64.")
    patterns = models.JSONField(default=list, help_text="Workflow keys it may claim: globs such as 'system.*'.")
    active = models.BooleanField(default=True)
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    deactivated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name"], condition=models.Q(active=True),
                                               name="system_actor_one_active_key")]
        ordering = ["name", "-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({'active' if self.active else 'inactive'}, {', '.join(self.patterns)})"


class ClaimNonce(models.Model):
    """A nonce of an accepted claim: the UNIQUE constraint refuses a replay. Rows whose claim
    timestamp has left the validity window are pruned (a replay of them is stale anyway)."""

    nonce = models.CharField(max_length=128)
    actor = models.ForeignKey(SystemActor, on_delete=models.PROTECT, related_name="+")
    claimed_at = models.DateTimeField(db_index=True, help_text="The claim's own (signed) timestamp.")
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [models.UniqueConstraint(fields=["nonce"], name="claim_nonce_unique")]

    def __str__(self) -> str:
        return self.nonce


class ThrottleCounter(models.Model):
    """Hits on one throttle key (``login:ip:…``, ``claim-refused:token:7``) in one fixed
    window; ``workflows.throttle`` upserts and prunes these rows. At most one row per key
    and window, so a flood of failures grows nothing but a counter."""

    key = models.CharField(max_length=200)
    window_start = models.DateTimeField(db_index=True)
    hits = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "window_start"], name="throttle_counter_unique")]

    def __str__(self) -> str:
        return f"{self.key} {self.window_start:%H:%M:%S} {self.hits}"
