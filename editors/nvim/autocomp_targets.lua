-- Generated from the target declarations (backends/<target>/target.py) by
-- `python -P -m autocomp.backends.editor_files --write`; a test checks it is current. Do not edit.

return {
  targets = { "gemmini", "nki", "cuda" },
  filetypes = { "c", "cpp", "python", "cuda" },
}
