"""The public import for TASK handler authors::

    from executions.handlers import handler, NonRetryable, HandlerContext

    @handler("billing.charge")
    def charge(data, context):
        return api.post("/charges", json=data, headers={"Idempotency-Key": context.idempotency_key})

The registry itself lives in the leaf module ``workflows.handlers`` (see its docstring for
the handler contract). The demo handlers (``demo.*``) live in the ``demo`` app, installed
only with ``SB_DEMO=1``.
"""

from workflows.handlers import Handler, HandlerContext, NonRetryable, handler, registry

__all__ = ["Handler", "HandlerContext", "NonRetryable", "handler", "registry"]
