"""Index kinds beyond min/max: the interface (`base`), their settings (`settings`), the registry (`registry`, the
kinds found by `loading` through the entry-point group `skipindex.index_kinds`), and one module per kind (`bloom`,
`automaton`)."""
