"""The Django admin's workflow-definition forms, as staff users post them."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client

from tests.support.helpers import NOOP

DEFINITIONS = "/admin/workflows/workflowdefinition/"
INLINE = {"versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0", "versions-MIN_NUM_FORMS": "0",
          "versions-MAX_NUM_FORMS": "1000"}


def add_definition(client: Client, workspace: Any, key: str, doc: Any = NOOP) -> Any:
    return client.post(f"{DEFINITIONS}add/", {"workspace": workspace.pk, "key": key, "dsl": json.dumps(doc),
                                              **INLINE})
