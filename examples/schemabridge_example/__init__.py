"""An example package of SchemaBridge TASK handlers. Deploy it next to SchemaBridge and set
``SB_HANDLER_MODULES=schemabridge_example.handlers`` (docs/dsl.md, "Handler packages")."""
