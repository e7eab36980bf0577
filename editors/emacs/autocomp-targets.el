;;; autocomp-targets.el --- Autocomp's targets and their major modes  -*- lexical-binding: t; -*-

;; Generated from the target declarations (backends/<target>/target.py) by
;; `python -P -m autocomp.backends.editor_files --write`; a test checks it is current. Do not edit.

;;; Code:

(defconst autocomp-targets '("gemmini" "nki" "cuda")
  "The targets shipped with Autocomp.")

(defconst autocomp-target-modes '(c-mode c++-mode c-ts-mode python-mode python-ts-mode cuda-mode c++-ts-mode)
  "Major modes whose buffers may hold a kernel of a shipped target.")

(provide 'autocomp-targets)
;;; autocomp-targets.el ends here
