-- Autocomp language server for Neovim 0.7 (Debian 12's nvim), which has no vim.lsp.start.
--
-- Copy this file to ~/.config/nvim/lua/autocomp.lua, with autocomp_targets.lua (the
-- targets' filetypes, generated) beside it, and call, from init.lua:
--
--   require("autocomp").setup({
--     settings = { autocomp = { llm = { "openai:gpt-4o" } } },
--   })
--
-- Same features as autocomp.lua (0.8+): lenses refreshed on every job status, code
-- actions, :AutocompOptimize / :AutocompCancel / :AutocompJobs, <leader>ao / <leader>ac.
-- One server per root folder, started with vim.lsp.start_client and attached per buffer.

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
  on_status = nil,
}

M.clients = {} -- root folder -> client id
M.last_status = {}

local function client_for(bufnr)
  for _, client in pairs(vim.lsp.buf_get_clients(bufnr)) do
    if client.name == "autocomp" then
      return client
    end
  end
end

local function refresh_lenses()
  if client_for(vim.api.nvim_get_current_buf()) then
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
  local dir = vim.fn.fnamemodify(path, ":p:h")
  local current = dir
  while current and current ~= "/" and current ~= "" do
    for _, marker in ipairs(markers) do
      if vim.loop.fs_stat(current .. "/" .. marker) then
        return current
      end
    end
    current = vim.fn.fnamemodify(current, ":h")
  end
  return dir
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
  execute(bufnr, "autocomp.optimize", {
    uri = vim.uri_from_bufnr(bufnr),
    line = vim.api.nvim_win_get_cursor(0)[1] - 1,
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

local function attach(bufnr, opts)
  local root = root_dir(bufnr, opts.root_markers)
  local id = M.clients[root]
  if not id or not vim.lsp.get_client_by_id(id) then
    id = vim.lsp.start_client({
      name = "autocomp",
      cmd = opts.cmd,
      root_dir = root,
      init_options = opts.settings,
      settings = opts.settings,
      handlers = { ["autocomp/jobStatus"] = on_job_status },
      on_attach = function(_, buf)
        refresh_lenses()
        if opts.keymaps then
          vim.keymap.set("n", "<leader>ao", M.optimize, { buffer = buf, desc = "Autocomp: optimize kernel" })
          vim.keymap.set("n", "<leader>ac", M.cancel, { buffer = buf, desc = "Autocomp: cancel" })
          vim.keymap.set("n", "<leader>al", vim.lsp.codelens.run, { buffer = buf, desc = "Autocomp: run lens" })
        end
      end,
    })
    M.clients[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
end

function M.setup(opts)
  opts = vim.tbl_deep_extend("force", M.defaults, opts or {})
  M.opts = opts
  local group = vim.api.nvim_create_augroup("autocomp", { clear = true })
  vim.api.nvim_create_autocmd("FileType", {
    group = group,
    pattern = opts.filetypes,
    callback = function(args)
      attach(args.buf, opts)
    end,
  })
  vim.api.nvim_create_autocmd({ "BufEnter", "InsertLeave", "BufWritePost", "CursorHold" }, {
    group = group,
    callback = refresh_lenses,
  })
  vim.api.nvim_create_user_command("AutocompOptimize", function(c)
    M.optimize({ restart = c.bang })
  end, { bang = true, desc = "Optimize the kernel under the cursor (! restarts a running job)" })
  vim.api.nvim_create_user_command("AutocompCancel", M.cancel, { desc = "Stop Autocomp jobs in this buffer" })
  vim.api.nvim_create_user_command("AutocompJobs", M.jobs, { desc = "List Autocomp jobs" })
end

return M
