-- Autocomp language server for Neovim 0.8 and newer.
--
-- Copy this file to ~/.config/nvim/lua/autocomp.lua, with autocomp_targets.lua (the
-- targets' filetypes, generated) beside it, and call, from init.lua:
--
--   require("autocomp").setup({
--     settings = { autocomp = { llm = { "openai:gpt-4o" }, search = { iterations = 8 } } },
--   })
--
-- What you get on a kernel of any target (Gemmini C, NKI Python, CUDA, ...):
--   * code lenses ("Optimize kernel", the live status line, "Cancel", measured metrics),
--     refreshed whenever the server reports progress (Neovim has no codeLens/refresh);
--   * code actions "Optimize kernel", "Apply this candidate (2.10x)", "Show diff";
--   * :AutocompOptimize, :AutocompCancel, :AutocompJobs, and <leader>ao / <leader>ac;
--   * the server's rewrite arrives as one edit: `u` undoes it.
-- Neovim 0.7 lacks vim.lsp.start: use autocomp-0.7.lua instead.

local M = {}

-- The filetypes that may hold a kernel come from the targets' own declarations, in the
-- generated autocomp_targets.lua next to this file (copy it along; a target plugin's
-- filetypes go in setup({ filetypes = ... })).
local function shipped_filetypes()
  local here = (debug.getinfo(1, "S").source or ""):match("^@(.*[/\\])") or ""
  local ok, targets = pcall(dofile, here .. "autocomp_targets.lua")
  if not ok then
    ok, targets = pcall(require, "autocomp_targets")
  end
  if ok and type(targets) == "table" and type(targets.filetypes) == "table" then
    return targets.filetypes
  end
  vim.notify("autocomp: autocomp_targets.lua is missing next to autocomp.lua; pass filetypes to setup()", vim.log.levels.WARN)
  return {}
end

M.defaults = {
  cmd = { "autocomp", "lsp" },
  filetypes = shipped_filetypes(),
  root_markers = { ".git", "pyproject.toml", "Makefile" },
  settings = { autocomp = {} },
  keymaps = true,
  on_status = nil, -- function(status) called for every autocomp/jobStatus
}

M.last_status = {}

local get_clients = vim.lsp.get_clients or vim.lsp.get_active_clients

local function client_for(bufnr)
  for _, client in pairs(get_clients({ bufnr = bufnr })) do
    if client.name == "autocomp" then
      return client
    end
  end
end

local function refresh_lenses()
  -- Only for buffers autocomp is attached to; codelens.refresh works on the current one.
  local bufnr = vim.api.nvim_get_current_buf()
  if client_for(bufnr) then
    pcall(vim.lsp.codelens.refresh)
  end
end

local function on_job_status(_, status, _)
  if type(status) ~= "table" then
    return
  end
  M.last_status[status.jobId] = status
  vim.schedule(function()
    refresh_lenses()
    if M.opts and M.opts.on_status then
      M.opts.on_status(status)
    elseif status.state ~= "running" then
      vim.notify(string.format("Autocomp %s %s: %s", status.kernel, status.state, status.message or ""))
    end
  end)
end

local function root_dir(bufnr, markers)
  local path = vim.api.nvim_buf_get_name(bufnr)
  local found = vim.fs.find(markers, { upward = true, path = vim.fs.dirname(path) })[1]
  return found and vim.fs.dirname(found) or vim.fs.dirname(path)
end

local function execute(bufnr, command, args)
  local client = client_for(bufnr)
  if not client then
    vim.notify("Autocomp is not attached to this buffer", vim.log.levels.WARN)
    return
  end
  client.request("workspace/executeCommand", { command = command, arguments = { args } }, function(err, result)
    if err then
      vim.notify("Autocomp: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    elseif command == "autocomp.optimize" and result then
      vim.notify("Autocomp: started " .. tostring(result.jobId))
    end
  end, bufnr)
end

function M.optimize(opts)
  local bufnr = vim.api.nvim_get_current_buf()
  local line = vim.api.nvim_win_get_cursor(0)[1] - 1
  execute(bufnr, "autocomp.optimize", {
    uri = vim.uri_from_bufnr(bufnr),
    line = line,
    restart = opts and opts.restart or nil,
  })
end

function M.cancel()
  local bufnr = vim.api.nvim_get_current_buf()
  execute(bufnr, "autocomp.cancel", { uri = vim.uri_from_bufnr(bufnr) })
end

function M.jobs()
  local client = client_for(vim.api.nvim_get_current_buf())
  if not client then
    return
  end
  client.request("autocomp/jobs", {}, function(_, result)
    local lines = {}
    for _, job in ipairs((result or {}).jobs or {}) do
      local best = job.bestSpeedup and string.format("%.2fx", job.bestSpeedup) or "-"
      table.insert(lines, string.format("%s %s %s it %d/%d best %s: %s", job.jobId, job.kernel, job.state,
        job.iteration, job.iterations, best, job.message or ""))
    end
    vim.notify(#lines > 0 and table.concat(lines, "\n") or "Autocomp: no jobs")
  end)
end

function M.setup(opts)
  opts = vim.tbl_deep_extend("force", M.defaults, opts or {})
  M.opts = opts
  local group = vim.api.nvim_create_augroup("autocomp", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = opts.filetypes,
    callback = function(args)
      vim.lsp.start({
        name = "autocomp",
        cmd = opts.cmd,
        root_dir = root_dir(args.buf, opts.root_markers),
        init_options = opts.settings,
        settings = opts.settings,
        handlers = { ["autocomp/jobStatus"] = on_job_status },
      }, { bufnr = args.buf })
    end,
  })
  vim.api.nvim_create_autocmd({ "BufEnter", "InsertLeave", "BufWritePost", "CursorHold" }, {
    group = group,
    callback = refresh_lenses,
  })
  vim.api.nvim_create_autocmd("LspAttach", {
    group = group,
    callback = function(args)
      local client = vim.lsp.get_client_by_id(args.data.client_id)
      if not client or client.name ~= "autocomp" then
        return
      end
      refresh_lenses()
      if opts.keymaps then
        vim.keymap.set("n", "<leader>ao", M.optimize, { buffer = args.buf, desc = "Autocomp: optimize kernel" })
        vim.keymap.set("n", "<leader>ac", M.cancel, { buffer = args.buf, desc = "Autocomp: cancel" })
        vim.keymap.set("n", "<leader>al", vim.lsp.codelens.run, { buffer = args.buf, desc = "Autocomp: run lens" })
      end
    end,
  })
  vim.api.nvim_create_user_command("AutocompOptimize", function(c)
    M.optimize({ restart = c.bang })
  end, { bang = true, desc = "Optimize the kernel under the cursor (! restarts a running job)" })
  vim.api.nvim_create_user_command("AutocompCancel", M.cancel, { desc = "Stop Autocomp jobs in this buffer" })
  vim.api.nvim_create_user_command("AutocompJobs", M.jobs, { desc = "List Autocomp jobs" })
end

return M
