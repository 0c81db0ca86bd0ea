"""Reading rows through the index: one small module per engine, each reading only a lookup's kept files at the
source version the lookup answered for, with their delete files and the filter."""
