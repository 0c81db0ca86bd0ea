"""Source tables: the interface (`base`), Iceberg (`iceberg`), Delta (`delta`), and opening one by name (`registry`)."""
