// abilities-mcp for OpenCode: carries the gates of abilities-mcp to OpenCode's own tools.
// Written by `abilities-mcp init opencode`; run it again to update. Every tool call asks
// `abilities-mcp hook opencode tool-before` first: exit 2 blocks the call (the reason is in stderr), and so does a
// gate that does not answer in time; anything else but 0 is a broken gate, which lets the call through and says so
// in OpenCode's log.
// A subagent works in a child session of the session that started it: its calls are gated (and its
// prerequisites recorded) as that session's, named as the subagent's. Calls to abilities-mcp's own tools are
// announced by the hook, so the server (which OpenCode gives no session id) files them under the same session.
import { spawn } from "node:child_process"
import { basename, dirname } from "node:path"
import { fileURLToPath } from "node:url"

// The command that runs abilities-mcp, as an argv list (`init opencode --command ...` sets it).
const COMMAND = __ABILITIES_MCP_COMMAND__
// Options after the hook's own: `--url URL` in team mode (`init opencode --url ...`: the team server decides).
const HOOK_OPTIONS = __ABILITIES_MCP_HOOK_OPTIONS__
// A gate that has not answered by then is killed, and its call refused: the hook refuses a call itself once its own
// budget (5 s) is spent, so only a hook that could not even start in time gets here.
const TIMEOUT_MS = 10_000
// Notes kept for calls whose tool.execute.after never came (another plugin threw): the oldest go first.
const MAX_NOTES = 200
// Tool output sent to tool-after: enough to keep as a prerequisite's result (the state keeps 200 characters).
const OUTPUT_CHARS = 4_000
// Sessions remembered (id -> parent and agent), for the subagents' child sessions: the oldest go first.
const MAX_SESSIONS = 1_000
// Parent links followed up to the session at the top (OpenCode nests subagents a few levels at most).
const MAX_DEPTH = 16

// The hook runs in the project, pinned by --root: over $ABILITIES_ROOT or $CLAUDE_PROJECT_DIR in OpenCode's
// environment, and over any working directory.
function ask(event, payload, root) {
  return new Promise((resolve) => {
    let child
    try {
      child = spawn(COMMAND[0], [...COMMAND.slice(1), "hook", "opencode", event, "--root", root, ...HOOK_OPTIONS], {
        cwd: root,
        stdio: ["pipe", "pipe", "pipe"],
      })
    } catch (error) {
      resolve({ code: -1, stdout: "", stderr: String(error) })
      return
    }
    let stdout = ""
    let stderr = ""
    let timedOut = false
    const timer = setTimeout(() => {
      timedOut = true
      child.kill("SIGKILL")
    }, TIMEOUT_MS)
    child.stdout.on("data", (chunk) => (stdout += chunk))
    child.stderr.on("data", (chunk) => (stderr += chunk))
    child.on("error", (error) => {
      clearTimeout(timer)
      resolve({ code: -1, stdout, stderr: stderr + String(error) })
    })
    child.on("close", (code) => {
      clearTimeout(timer)
      if (timedOut) {
        const said = `abilities-mcp hook opencode ${event} did not answer within ${TIMEOUT_MS / 1000} s`
        resolve({ code: event === "tool-before" ? 2 : -1, stdout: "", stderr: `${said}; the call is refused` })
        return
      }
      resolve({ code: code ?? -1, stdout, stderr })
    })
    child.stdin.on("error", () => {}) // the gate may answer before reading everything
    child.stdin.end(JSON.stringify(payload))
  })
}

function context(answer, event) {
  if (answer.code !== 0) {
    console.error(`abilities-mcp hook opencode ${event} failed (exit ${answer.code}); allowed: ${answer.stderr.trim()}`)
    return ""
  }
  try {
    return JSON.parse(answer.stdout || "{}").context || ""
  } catch {
    return ""
  }
}

// The project is the folder whose .opencode/plugins/ holds this file (OpenCode may have been started in a
// subfolder of it); a copy kept anywhere else serves the folder OpenCode was started in.
function projectRoot(directory) {
  const plugins = dirname(fileURLToPath(import.meta.url))
  const opencode = dirname(plugins)
  return basename(plugins) === "plugins" && basename(opencode) === ".opencode" ? dirname(opencode) : directory
}

// What a tool returned, as the model reads it: OpenCode's own tools give `output` (a string); an MCP tool gives
// the MCP result ({content: [{type: "text", text}, ...]}), whose text parts OpenCode joins after this hook.
function resultText(output) {
  if (typeof output.output === "string") return output.output
  if (Array.isArray(output.content)) {
    return output.content
      .filter((part) => part && part.type === "text" && typeof part.text === "string")
      .map((part) => part.text)
      .join("\n")
  }
  return output.output == null ? "" : JSON.stringify(output.output)
}

// Whether a call failed, as its result says: an MCP tool's result with isError, a shell command's non-zero exit
// (OpenCode's bash tool keeps it in metadata.exit). The hook never counts a failed call as a prerequisite.
function failed(output) {
  if (output?.isError === true) return true
  const exit = output?.metadata?.exit
  return typeof exit === "number" && exit !== 0
}

function appendNote(output, extra) {
  if (typeof output.output === "string") output.output += `\n\n${extra}`
  else if (Array.isArray(output.content)) output.content.push({ type: "text", text: extra })
}

// Which session a call counts for: the top of its chain of parent sessions, and the subagent (the child
// session's agent) when it came from one. OpenCode announces every session it creates (session.created, with
// parentID and agent); one this plugin did not see is asked for through OpenCode's client.
function lineage(client) {
  const sessions = new Map() // id -> { parentID, agent }
  const remember = (info) => {
    if (!info || typeof info.id !== "string") return
    sessions.delete(info.id)
    sessions.set(info.id, { parentID: info.parentID || "", agent: info.agent || "" })
    if (sessions.size > MAX_SESSIONS) sessions.delete(sessions.keys().next().value)
  }
  const lookup = async (id) => {
    if (!sessions.has(id)) {
      try {
        const found = await client?.session?.get?.({ path: { id } })
        remember(found?.data ?? { id })
      } catch {
        remember({ id })
      }
    }
    return sessions.get(id)
  }
  return {
    remember,
    async of(sessionID) {
      let id = sessionID
      let subagent
      for (let depth = 0; id && depth < MAX_DEPTH; depth++) {
        const info = await lookup(id)
        if (!info?.parentID) break
        if (subagent === undefined) subagent = info.agent
        id = info.parentID
      }
      return { sessionID: id || sessionID, subagent }
    },
  }
}

export const AbilitiesMcp = async ({ directory, client }) => {
  const root = projectRoot(directory)
  const notes = new Map() // callID -> what tool-before had to say, appended to the tool's output
  const sessions = lineage(client)
  return {
    event: async ({ event }) => {
      if (event?.type === "session.created" || event?.type === "session.updated") {
        sessions.remember(event.properties?.info)
      }
    },
    "tool.execute.before": async (input, output) => {
      const { sessionID, subagent } = await sessions.of(input.sessionID)
      const payload = { tool: input.tool, sessionID, subagent, callID: input.callID, args: output.args, cwd: root }
      const answer = await ask("tool-before", payload, root)
      if (answer.code === 2) throw new Error(answer.stderr.trim() || `abilities-mcp blocked ${input.tool}`)
      const note = context(answer, "tool-before")
      if (note) notes.set(input.callID, note)
      if (notes.size > MAX_NOTES) notes.delete(notes.keys().next().value)
    },
    "tool.execute.after": async (input, output) => {
      const { sessionID, subagent } = await sessions.of(input.sessionID)
      const payload = {
        tool: input.tool,
        sessionID,
        subagent,
        callID: input.callID,
        output: resultText(output).slice(0, OUTPUT_CHARS),
        failed: failed(output),
        cwd: root,
      }
      const note = [notes.get(input.callID), context(await ask("tool-after", payload, root), "tool-after")]
      notes.delete(input.callID)
      const extra = note.filter(Boolean).join("\n\n")
      if (extra) appendNote(output, extra)
    },
  }
}
