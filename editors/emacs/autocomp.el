;;; autocomp.el --- Autocomp language server through eglot  -*- lexical-binding: t; -*-

;; Copy this file and autocomp-targets.el (the targets' major modes, generated from their
;; declarations) somewhere on your `load-path' and add to your init file:
;;
;;   (require 'autocomp)
;;   (setq autocomp-settings '(:llm ["openai:gpt-4o"] :search (:iterations 8)))
;;   (dolist (mode autocomp-eglot-modes)           ; the targets' major modes
;;     (add-hook (intern (format "%s-hook" mode)) #'eglot-ensure))
;;
;; Then, on a kernel: M-x eglot-code-actions (or C-c a o below) offers "Optimize kernel";
;; the search runs in the background, candidates appear as notes (flymake diagnostics)
;; with "Apply this candidate (2.10x)" / "Show diff" actions, the echo area shows the
;; job status, and the final rewrite is one edit that `undo' reverts (or
;; M-x autocomp-revert).  Autocomp's edits are applied without eglot's y/n prompt.
;;
;; eglot 1.9 (Debian 12's elpa-eglot) has no code lenses and no progress UI: everything
;; here goes through code actions, diagnostics, messages and commands, which it has.
;; eglot uses one server per major mode: listing a mode in `autocomp-eglot-modes' makes
;; Autocomp that mode's server (instead of, say, clangd or pylsp) in eglot.

;;; Code:

(require 'cl-lib)
(require 'eglot)
(require 'jsonrpc)

(defgroup autocomp nil
  "LLM-driven, hardware-verified kernel optimization."
  :group 'tools)

(defcustom autocomp-lsp-command '("autocomp" "lsp")
  "Command that starts the Autocomp language server."
  :type '(repeat string))

;; The major modes of the shipped targets, generated from the targets' own declarations
;; (autocomp-targets.el, next to this file: copy both).
(require 'autocomp-targets
         (expand-file-name "autocomp-targets"
                           (file-name-directory (or load-file-name buffer-file-name default-directory)))
         t)

(defcustom autocomp-eglot-modes (if (boundp 'autocomp-target-modes) autocomp-target-modes '())
  "Major modes whose eglot server is Autocomp (default: the shipped targets' modes, from
autocomp-targets.el; add a target plugin's modes here)."
  :type '(repeat symbol))

(defcustom autocomp-settings '()
  "The `autocomp.*' settings as a plist, e.g.
  (:llm [\"openai:gpt-4o\"] :search (:iterations 8 :beam 4) :minSpeedup 1.05
   :target (:gemmini (:spike \"/opt/spike/bin/spike\")))
Sent as initializationOptions and answered on workspace/configuration."
  :type 'sexp)

(defvar autocomp-status-functions nil
  "Functions called with each autocomp/jobStatus plist (:jobId :state :bestSpeedup ...).")

(defvar autocomp-last-status nil
  "The most recent autocomp/jobStatus plist.")

(defclass eglot-autocomp (eglot-lsp-server) ()
  :documentation "The Autocomp language server.")

(cl-defmethod eglot-initialization-options ((_server eglot-autocomp))
  (list :autocomp (or autocomp-settings eglot--{})))

(defun autocomp--workspace-configuration (_server)
  "Answer workspace/configuration for the `autocomp' section."
  (list :autocomp (or autocomp-settings eglot--{})))

(cl-defmethod eglot-handle-notification
  ((_server eglot-autocomp) (_method (eql autocomp/jobStatus)) &rest status)
  "Show job progress in the echo area (eglot 1.9 has no progress UI)."
  (setq autocomp-last-status status)
  (run-hook-with-args 'autocomp-status-functions status)
  (let ((best (plist-get status :bestSpeedup))
        (progress (plist-get status :progress)))
    (if (and (equal (plist-get status :state) "running") (stringp progress) (> (length progress) 0))
        ;; The server's one progress snapshot: the same text as the lens and $/progress.
        (message "Autocomp %s: %s" (plist-get status :kernel) progress)
      (message "Autocomp %s: %s, %s candidates, best %s"
               (plist-get status :kernel) (plist-get status :state)
               (plist-get status :evaluated)
               (if (numberp best) (format "%.2fx" best) "-")))))

(defun autocomp--flush-changes (server)
  "Send SERVER the changes eglot still holds back (it batches them)."
  (dolist (buffer (eglot--managed-buffers server))
    (when (buffer-live-p buffer)
      (with-current-buffer buffer
        (ignore-errors (eglot--signal-textDocument/didChange))))))

(cl-defmethod eglot-handle-request
  ((server eglot-autocomp) (_method (eql workspace/applyEdit)) &key _label edit)
  "Apply Autocomp's edit without eglot's blocking y/n prompt.
Each edit is one change `undo' reverts (and the server offers a Revert lens/command),
so, as in VS Code and Neovim, it is applied at once and typing is never swallowed by
a prompt.  When the buffer moved on since the server computed the edit (a version
mismatch: you typed meanwhile), our newer text is sent first and the edit is refused
with `applied: false'; the server then re-anchors it on the new text and retries once,
as it does for the other clients."
  (condition-case err
      (progn (eglot--apply-workspace-edit edit nil)
             `(:applied t))
    (jsonrpc-error
     (autocomp--flush-changes server)
     `(:applied :json-false
       :failureReason ,(or (alist-get 'jsonrpc-error-message (cdr err)) (format "%s" (cadr err)))))))

(defun autocomp--server ()
  (let ((server (eglot-current-server)))
    (unless (and server (cl-typep server 'eglot-autocomp))
      (user-error "Autocomp is not managing this buffer (M-x eglot)"))
    server))

(defun autocomp-optimize (&optional restart)
  "Optimize the kernel at point; with prefix argument RESTART a running job."
  (interactive "P")
  (let ((result (jsonrpc-request
                 (autocomp--server) :workspace/executeCommand
                 `(:command "autocomp.optimize"
                   :arguments [(:uri ,(eglot--path-to-uri (buffer-file-name))
                                :line ,(1- (line-number-at-pos))
                                :restart ,(if restart t :json-false))]))))
    (message "Autocomp: job %s" (plist-get result :jobId))))

(defun autocomp-cancel ()
  "Stop Autocomp jobs on this buffer's kernels (the best so far is offered)."
  (interactive)
  (jsonrpc-request (autocomp--server) :workspace/executeCommand
                   `(:command "autocomp.cancel"
                     :arguments [(:uri ,(eglot--path-to-uri (buffer-file-name)))])))

(defun autocomp-revert ()
  "Put back the kernel Autocomp's latest applied rewrite in this buffer replaced."
  (interactive)
  (let* ((uri (eglot--path-to-uri (buffer-file-name)))
         (jobs (plist-get (jsonrpc-request (autocomp--server) :autocomp/jobs eglot--{}) :jobs))
         (job (cl-find-if (lambda (j) (and (equal (plist-get j :uri) uri) (eq (plist-get j :applied) t)))
                          (reverse (append jobs nil)))))
    (unless job (user-error "Autocomp: nothing applied in this buffer"))
    (message "%s" (plist-get (jsonrpc-request (autocomp--server) :workspace/executeCommand
                                              `(:command "autocomp.revert"
                                                :arguments [(:jobId ,(plist-get job :jobId))]))
                             :message))))

(defun autocomp-jobs ()
  "List Autocomp jobs."
  (interactive)
  (let ((jobs (plist-get (jsonrpc-request (autocomp--server) :autocomp/jobs eglot--{}) :jobs)))
    (message "%s"
             (if (seq-empty-p jobs) "Autocomp: no jobs"
               (mapconcat (lambda (j)
                            (format "%s %s %s best %s: %s" (plist-get j :jobId) (plist-get j :kernel)
                                    (plist-get j :state) (plist-get j :bestSpeedup) (plist-get j :message)))
                          jobs "\n")))))

(defun autocomp-setup ()
  "Register Autocomp with eglot for `autocomp-eglot-modes'."
  (setq-default eglot-workspace-configuration #'autocomp--workspace-configuration)
  (add-to-list 'eglot-server-programs
               `(,autocomp-eglot-modes . (eglot-autocomp ,@autocomp-lsp-command))))

(defvar autocomp-command-map
  (let ((map (make-sparse-keymap)))
    (define-key map (kbd "o") #'autocomp-optimize)
    (define-key map (kbd "c") #'autocomp-cancel)
    (define-key map (kbd "j") #'autocomp-jobs)
    (define-key map (kbd "r") #'autocomp-revert)
    (define-key map (kbd "a") #'eglot-code-actions)
    map)
  "Autocomp commands; bound to C-c a in eglot-managed buffers.")

(add-hook 'eglot-managed-mode-hook
          (lambda ()
            (when (cl-typep (eglot-current-server) 'eglot-autocomp)
              (local-set-key (kbd "C-c a") autocomp-command-map))))

(autocomp-setup)

(provide 'autocomp)
;;; autocomp.el ends here
