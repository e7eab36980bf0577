-- Drives a real headless Neovim through one Autocomp optimization with the user config
-- from editors/nvim (the file named by AUTOCOMP_E2E_CONFIG), then writes what happened
-- to AUTOCOMP_E2E_OUT as JSON. Run by tests/e2e/test_e2e_editors.py:
--   nvim --headless --clean -c 'luafile tests/e2e/nvim_driver.lua'
local decode = (vim.json and vim.json.decode) or vim.fn.json_decode
local encode = (vim.json and vim.json.encode) or vim.fn.json_encode
local env = function(name)
  local value = os.getenv(name)
  assert(value, name .. " is not set")
  return value
end

local function clients_of(bufnr)
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ bufnr = bufnr })
  end
  return vim.lsp.buf_get_clients(bufnr)
end

local out_path = env("AUTOCOMP_E2E_OUT")
local report = { statuses = {}, messages = {} }

local function finish(code)
  local fh = io.open(out_path, "w")
  fh:write(encode(report))
  fh:close()
  vim.cmd(code == 0 and "qa!" or "cquit " .. code)
end

local ok, err = pcall(function()
  local config = dofile(env("AUTOCOMP_E2E_CONFIG"))
  local filetype = env("AUTOCOMP_E2E_FILETYPE")
  config.setup({
    cmd = decode(env("AUTOCOMP_E2E_CMD")),
    settings = decode(env("AUTOCOMP_E2E_SETTINGS")),
    filetypes = { filetype },
    keymaps = false,
    on_status = function(status)
      table.insert(report.statuses, status)
    end,
  })
  local notify = vim.notify
  vim.notify = function(msg, level)
    table.insert(report.messages, msg)
    return notify(msg, level)
  end
  vim.lsp.handlers["window/showMessage"] = function(_, result)
    table.insert(report.messages, result.message)
  end

  vim.cmd("edit " .. env("AUTOCOMP_E2E_FILE"))
  local bufnr = vim.api.nvim_get_current_buf()
  vim.bo[bufnr].filetype = filetype
  report.original = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")

  local client
  assert(vim.wait(30000, function()
    for _, c in pairs(clients_of(bufnr)) do
      if c.name == "autocomp" and c.initialized ~= false then
        client = c
      end
    end
    return client ~= nil
  end, 50), "the autocomp client never attached")

  local line = tonumber(env("AUTOCOMP_E2E_LINE"))
  vim.api.nvim_win_set_cursor(0, { line + 1, 0 })
  -- The "Optimize kernel" code action, as the editor's own code-action request sees it.
  local params = {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    range = { start = { line = line, character = 0 }, ["end"] = { line = line, character = 0 } },
    context = { diagnostics = {} },
  }
  local responses = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", params, 20000) or {}
  local action
  for _, response in pairs(responses) do
    for _, a in ipairs(response.result or {}) do
      if a.title:match("^Optimize kernel") then
        action = a
      end
    end
  end
  assert(action, "no 'Optimize kernel' code action: " .. vim.inspect(responses))
  report.action = action.title
  if vim.fn.has("nvim-0.8") == 1 then
    -- The real UI path: apply the filtered action without a prompt.
    vim.lsp.buf.code_action({
      apply = true,
      filter = function(a)
        return a.title == action.title
      end,
    })
  else
    vim.lsp.buf.execute_command(action.command)
  end

  local done = vim.wait(tonumber(env("AUTOCOMP_E2E_TIMEOUT_MS")), function()
    for _, s in ipairs(report.statuses) do
      if s.state ~= "running" then
        report.final = s
      end
    end
    local text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
    return report.final ~= nil
      and (text ~= report.original or report.final.state ~= "finished" or report.final.confirmed == false)
  end, 100)
  assert(done, "the job did not finish in time: " .. vim.inspect(report.statuses[#report.statuses]))
  vim.wait(500, function()
    return false
  end, 50)
  local function text_now()
    return table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
  end
  if text_now() == report.original and report.final.state == "finished" then
    -- Not applied automatically (an estimate-only tier): the user picks the candidate
    -- from the diagnostic's code action "Apply this candidate (…x)".
    report.applied_via = "code action"
    vim.wait(5000, function()
      return #vim.diagnostic.get(bufnr) > 0
    end, 50)
    report.diagnostics = {}
    for _, d in ipairs(vim.diagnostic.get(bufnr)) do
      table.insert(report.diagnostics, d.message)
    end
    vim.api.nvim_win_set_cursor(0, { line + 1, 0 })
    if vim.fn.has("nvim-0.8") == 1 then
      vim.lsp.buf.code_action({
        apply = true,
        filter = function(a)
          return a.title:match("^Apply this candidate") ~= nil
        end,
      })
    else
      local ctx_params = vim.deepcopy(params)
      ctx_params.context = { diagnostics = vim.lsp.diagnostic.get_line_diagnostics(bufnr, line) }
      local res = vim.lsp.buf_request_sync(bufnr, "textDocument/codeAction", ctx_params, 20000) or {}
      local apply
      for _, response in pairs(res) do
        for _, a in ipairs(response.result or {}) do
          if not apply and a.title:match("^Apply this candidate") then
            apply = a
          end
        end
      end
      assert(apply, "no 'Apply this candidate' action: " .. vim.inspect(res))
      vim.lsp.buf.execute_command(apply.command)
    end
    assert(vim.wait(30000, function()
      return text_now() ~= report.original
    end, 50), "applying the candidate did not change the buffer")
  else
    report.applied_via = "auto"
  end
  report.final_text = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
  -- The lenses once the server has taken the apply in ("Applied …x · Diff · Revert"): the
  -- buffer changes before the server hears the edit was applied.
  local function lens_titles()
    local titles = {}
    local res = vim.lsp.buf_request_sync(bufnr, "textDocument/codeLens",
      { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }, 5000) or {}
    for _, response in pairs(res) do
      for _, lens in ipairs(response.result or {}) do
        table.insert(titles, lens.command and lens.command.title or "")
      end
    end
    return titles
  end
  vim.wait(10000, function()
    report.lenses = lens_titles()
    for _, t in ipairs(report.lenses) do
      if t:match("^Applied ") then
        return true
      end
    end
    return false
  end, 200)
  vim.cmd("silent undo")
  report.after_undo = table.concat(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false), "\n")
  -- After the undo the server offers the candidate again: "Apply …x · Diff", and the
  -- status line says "candidate available" (the editor's own didChange tells it).
  local lens_params = { textDocument = { uri = vim.uri_from_bufnr(bufnr) } }
  vim.wait(10000, function()
    report.lenses_after_undo = {}
    local res = vim.lsp.buf_request_sync(bufnr, "textDocument/codeLens", lens_params, 5000) or {}
    local offered = false
    for _, response in pairs(res) do
      for _, lens in ipairs(response.result or {}) do
        local title = lens.command and lens.command.title or ""
        table.insert(report.lenses_after_undo, title)
        if title:match("^Apply ") then
          offered = true
        end
      end
    end
    return offered
  end, 200)
  report.version = tostring(vim.version().major) .. "." .. tostring(vim.version().minor)
end)

if not ok then
  report.error = tostring(err)
  finish(3)
else
  finish(0)
end
