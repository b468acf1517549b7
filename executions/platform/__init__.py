"""Infrastructure every layer may use: NOTIFY wake-ups, metrics, log context, transient-error retry."""
