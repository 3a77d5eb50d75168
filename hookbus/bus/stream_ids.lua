-- Helpers for scripts that compare stream entry ids and read XINFO replies; a script takes
-- them in with an include line naming stream_ids (see hookbus/bus/lua.py).
local function parse(id)
  local dash = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end

local function less(a, b)
  local am, as = parse(a)
  local bm, bs = parse(b)
  return am < bm or (am == bm and as < bs)
end

local function field(list, name)
  for i = 1, #list, 2 do
    if list[i] == name then
      return list[i + 1]
    end
  end
  return nil
end
