// Generated from the target declarations (backends/<target>/target.py) by
// `python -P -m autocomp.backends.editor_files --write`; a test checks it is current. Do not edit.

/** A target shipped with Autocomp: its name, how the UI names its kernels, its LSP language ids. */
export interface TargetLanguages {
  name: string;
  label: string;
  languages: string[];
}

export const TARGETS: readonly TargetLanguages[] = [
  { name: "gemmini", label: "Gemmini C", languages: ["c"] },
  { name: "nki", label: "NKI Python", languages: ["python"] },
  { name: "cuda", label: "CUDA", languages: ["cuda-cpp", "python"] },
];

/** The LSP language ids whose documents may hold a kernel (the client's document selector). */
export const LANGUAGES: readonly string[] = ["c", "python", "cuda-cpp"];
