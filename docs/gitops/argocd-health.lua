-- Argo CD health check for tenancy.dev/TenantPlatform (argocd-cm key
-- resource.customizations.health.tenancy.dev_TenantPlatform; see docs/gitops.md).
-- Order: no status -> Progressing; paused (Reconciling=False, reason Paused) -> Suspended;
-- a stale observedGeneration -> Progressing; Stalled=True -> Degraded; Ready=True -> Healthy;
-- Reconciling=True -> Progressing with what it waits for; else Progressing with Ready's reason.
local hs = {}
hs.status = "Progressing"
hs.message = "Waiting for the TenantPlatform operator to report status"

if obj.status == nil then
  return hs
end

local ready = nil
local reconciling = nil
local stalled = nil
if obj.status.conditions ~= nil then
  for _, condition in ipairs(obj.status.conditions) do
    if condition.type == "Ready" then
      ready = condition
    elseif condition.type == "Reconciling" then
      reconciling = condition
    elseif condition.type == "Stalled" then
      stalled = condition
    end
  end
end

local function describe(condition)
  local text = condition.reason or condition.status or ""
  if condition.message ~= nil and condition.message ~= "" then
    text = text .. ": " .. condition.message
  end
  return text
end

if reconciling ~= nil and reconciling.status == "False" and reconciling.reason == "Paused" then
  hs.status = "Suspended"
  hs.message = describe(reconciling)
  return hs
end

local generation = obj.metadata.generation
local observed = obj.status.observedGeneration
if generation ~= nil and (observed == nil or observed < generation) then
  hs.message = "Waiting for the operator to observe generation " .. tostring(generation)
    .. " (observed " .. tostring(observed or "none") .. ")"
  return hs
end

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = describe(stalled)
  return hs
end

if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = describe(ready)
  return hs
end

if reconciling ~= nil and reconciling.status == "True" then
  hs.message = describe(reconciling)
elseif ready ~= nil then
  hs.message = describe(ready)
end
return hs
