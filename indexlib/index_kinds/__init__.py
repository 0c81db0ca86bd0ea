"""Index kinds beyond min/max: the interface (`base`), the registry (`registry`), their settings (`settings`), and
one module per kind (`bloom`, `automaton`)."""
