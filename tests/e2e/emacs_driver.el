;;; emacs_driver.el --- drive Emacs + eglot through one Autocomp optimization  -*- lexical-binding: t; -*-
;; Run by tests/e2e/test_e2e_editors.py: emacs --batch -q -l tests/e2e/emacs_driver.el
;; Loads the user config editors/emacs/autocomp.el (AUTOCOMP_E2E_CONFIG), opens the
;; kernel, runs the "Optimize kernel" code action the way M-x eglot-code-actions does,
;; waits for the rewrite, checks undo, and writes a JSON report to AUTOCOMP_E2E_OUT.

(require 'json)
(package-initialize)
(let ((elpa "/usr/share/emacs/site-lisp/elpa"))
  (when (file-directory-p elpa)
    (dolist (dir (directory-files elpa t "^[^.]"))
      (add-to-list 'load-path dir))))

(defvar e2e-report (list (cons 'statuses [])))
(defvar e2e-statuses nil)

(defun e2e-env (name)
  (or (getenv name) (error "%s is not set" name)))

(defun e2e-finish (code)
  (with-temp-file (e2e-env "AUTOCOMP_E2E_OUT")
    (insert (json-encode (cons (cons 'statuses (vconcat (reverse e2e-statuses))) e2e-report))))
  (kill-emacs code))

(defun e2e-buffer-text ()
  (save-restriction (widen) (buffer-substring-no-properties (point-min) (point-max))))

(define-derived-mode autocomp-e2e-kern-mode prog-mode "kern"
  "Mode for the scripted backend double's .kern files (tests only).")

(condition-case err
    (progn
      (load (e2e-env "AUTOCOMP_E2E_CONFIG") nil t)
      (let* ((mode (intern (e2e-env "AUTOCOMP_E2E_MODE")))
             (settings (json-parse-string (e2e-env "AUTOCOMP_E2E_SETTINGS")
                                          :object-type 'plist :array-type 'array))
             (timeout (string-to-number (e2e-env "AUTOCOMP_E2E_TIMEOUT")))
             (line (string-to-number (e2e-env "AUTOCOMP_E2E_LINE"))))
        (setq autocomp-lsp-command (append (json-parse-string (e2e-env "AUTOCOMP_E2E_CMD") :array-type 'list) nil))
        (setq autocomp-eglot-modes (list mode))
        (setq autocomp-settings (plist-get settings :autocomp))
        (autocomp-setup)
        ;; The shipped config must apply edits without eglot's blocking y/n prompt: any
        ;; prompt is recorded (and answered, so the run goes on) and fails the test.
        (advice-add 'y-or-n-p :around
                    (lambda (_orig prompt &rest _)
                      (push (cons 'prompted prompt) e2e-report) t))
        ;; AUTOCOMP_E2E_TYPE_DURING_APPLY: the user types (a line at the end of the file)
        ;; between the server computing its first edit and eglot applying it, so eglot
        ;; sees a version mismatch; the server must re-anchor and retry.
        (when (getenv "AUTOCOMP_E2E_TYPE_DURING_APPLY")
          (let ((typed "\n# typed while the edit was in flight\n") (done nil))
            (push (cons 'typed typed) e2e-report)
            (advice-add 'eglot--apply-workspace-edit :before
                        (lambda (&rest _)
                          (push (cons 'apply_attempt (float-time)) e2e-report)
                          (unless done
                            (setq done t)
                            (with-current-buffer (find-buffer-visiting (e2e-env "AUTOCOMP_E2E_FILE"))
                              (save-excursion (goto-char (point-max)) (insert typed))
                              (undo-boundary)))))))
        (add-hook 'autocomp-status-functions (lambda (status) (push status e2e-statuses)))
        (find-file (e2e-env "AUTOCOMP_E2E_FILE"))
        (funcall mode)
        (let ((original (e2e-buffer-text)) (deadline (+ (float-time) timeout)))
          (push (cons 'original original) e2e-report)
          (apply #'eglot (eglot--guess-contact))
          (while (and (not (eglot-current-server)) (< (float-time) deadline))
            (accept-process-output nil 0.1))
          (unless (eglot-current-server) (error "eglot never connected"))
          (goto-char (point-min))
          (forward-line line)
          (let ((actions (eglot-code-actions (point) nil "refactor.rewrite" nil)))
            (unless actions (error "no refactor.rewrite code action at line %d" line))
            (push (cons 'action (plist-get (car actions) :title)) e2e-report))
          ;; The interactive path: with one action of the kind, eglot runs it directly.
          (eglot-code-actions (point) nil "refactor.rewrite" t)
          (let (final)
            (while (and (< (float-time) deadline)
                        (not (and (setq final (cl-find-if (lambda (s) (not (equal (plist-get s :state) "running")))
                                                          e2e-statuses))
                                  (or (not (equal (e2e-buffer-text) original))
                                      (not (equal (plist-get final :state) "finished"))
                                      (memq (plist-get final :confirmed) '(:json-false nil))))))
              (accept-process-output nil 0.1))
            (unless final (error "the job did not finish in time: %S" (car e2e-statuses)))
            (accept-process-output nil 0.5)
            (push (cons 'final final) e2e-report)
            (if (not (and (equal (e2e-buffer-text) original) (equal (plist-get final :state) "finished")))
                (push (cons 'applied_via "auto") e2e-report)
              ;; Not applied automatically (an estimate-only tier): the user picks
              ;; "Apply this candidate (…x)" among the quick fixes on the kernel.
              (push (cons 'applied_via "code action") e2e-report)
              (let* ((fixes (eglot-code-actions (point) nil "quickfix" nil))
                     (apply (cl-find-if (lambda (a) (string-prefix-p "Apply this candidate" (plist-get a :title)))
                                        fixes))
                     (command (plist-get apply :command)))
                (unless apply (error "no 'Apply this candidate' quick fix: %S" fixes))
                (eglot-execute-command (eglot-current-server) (intern (plist-get command :command))
                                       (plist-get command :arguments))
                (while (and (< (float-time) deadline) (equal (e2e-buffer-text) original))
                  (accept-process-output nil 0.1)))))
          (push (cons 'apply_attempts (cl-count 'apply_attempt e2e-report :key #'car)) e2e-report)
          (push (cons 'final_text (e2e-buffer-text)) e2e-report)
          (undo-boundary)
          (let ((last-command nil)) (undo))
          (push (cons 'after_undo (e2e-buffer-text)) e2e-report)
          ;; eglot 1.9 draws no lenses, but the server's answer says what the kernel's state
          ;; is: after the undo, the candidate is offered again ("Apply …x").
          (eglot--signal-textDocument/didChange)
          (let ((titles nil) (tries 0))
            (while (and (< tries 50) (not (cl-some (lambda (tt) (string-prefix-p "Apply " tt)) titles)))
              (setq tries (1+ tries))
              (accept-process-output nil 0.2)
              (setq titles (mapcar (lambda (l) (plist-get (plist-get l :command) :title))
                                   (append (jsonrpc-request (eglot-current-server) :textDocument/codeLens
                                                            `(:textDocument ,(eglot--TextDocumentIdentifier)))
                                           nil))))
            (push (cons 'lenses_after_undo (vconcat titles)) e2e-report))
          (push (cons 'version emacs-version) e2e-report)
          (set-buffer-modified-p nil)
          (ignore-errors (eglot-shutdown (eglot-current-server)))))
      (e2e-finish 0))
  (error
   (push (cons 'error (format "%S" err)) e2e-report)
   (e2e-finish 3)))
