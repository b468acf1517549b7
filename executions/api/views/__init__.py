"""API views: one method per operation. Each parses its input, checks its role inside its
audit block, calls one service (or one read) and renders."""
