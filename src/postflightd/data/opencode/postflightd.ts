// postflightd for OpenCode (written by `postflightd init`). When a session goes idle, it runs
// `postflightd hook opencode` with the files the session's tools wrote; when the answer blocks,
// it sends the reason to the session as a new prompt, waits for that turn, and asks again.
// OpenCode does not await event handlers but awaits `dispose` before it ends (`opencode run`
// ends at the first idle): dispose waits for every check under way. It never throws.
import { spawn } from "node:child_process"
import { accessSync, constants, statSync } from "node:fs"
import { isAbsolute, join, resolve } from "node:path"

const MAX_TRIES = 3 // prompts in a row per session; the hook stops blocking then too
const WRITERS = new Set(["write", "edit", "multiedit", "patch", "apply_patch"])
const SHELL = "bash" // its commands go to the hook as they are: it reads the files they name
const TIMEOUT_MS = 60_000
const MAX_ANSWER = 1 << 20

// postflightd from PATH's absolute entries, run from `/`: an empty or relative entry (`.`, or the
// one `PATH=$EXTRA:$PATH` leaves) names the working directory, the project, which agents write.
const program = (): string | undefined => (process.env.PATH ?? "").split(":").filter((dir) => isAbsolute(dir))
  .map((dir) => join(dir, "postflightd"))
  .find((path) => { try { return statSync(path).isFile() && (accessSync(path, constants.X_OK), true) } catch { return false } })

function ask(input: object): Promise<Record<string, unknown>> {
  return new Promise((done) => {
    let out = ""
    const path = program()
    if (!path) return done({}) // none: nothing to ask, as when the spawn fails
    const child = spawn(path, ["hook", "opencode"], { cwd: "/", stdio: ["pipe", "pipe", "ignore"] })
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS)
    child.on("error", () => (clearTimeout(timer), done({})))
    child.stdout.on("data", (chunk) => (out.length < MAX_ANSWER ? (out += chunk) : child.kill("SIGKILL")))
    child.on("close", (code) => {
      clearTimeout(timer)
      let answer: unknown = null
      try { answer = code === 0 ? JSON.parse(out) : null } catch {}
      done(answer && typeof answer === "object" ? (answer as Record<string, unknown>) : {})
    })
    child.stdin.on("error", () => {})
    child.stdin.end(JSON.stringify(input))
  })
}

export const PostflightdPlugin = async ({ client, directory }: { client: any; directory: string }) => {
  const written = new Map<string, Set<string>>() // session id -> absolute paths its tools wrote
  const commands = new Map<string, Set<string>>() // session id -> its shell commands
  const tries = new Map<string, number>()
  const running = new Map<string, Promise<void>>() // session id -> its check under way
  const prompting = new Set<string>(), again = new Set<string>() // a prompt's turn went idle
  const calls = new Map<string, any>() // call id -> arguments, where tool.execute.after lacks them
  const note = (id: unknown, path: unknown) => {
    if (typeof id !== "string" || typeof path !== "string" || !path) return
    written.set(id, (written.get(id) ?? new Set<string>()).add(resolve(directory, path)))
  }
  const toast = async (message: string) => { // the TUI's toast; OpenCode's log everywhere (`run` shows no toast)
    try { await client.tui.showToast({ body: { message, variant: "warning" } }) } catch {}
    try { await client.app.log({ body: { service: "postflightd", level: "warn", message } }) } catch {}
  }
  async function check(id: string) {
    for (;;) {
      const attempt = tries.get(id) ?? 0
      const files = [...(written.get(id) ?? [])], run = [...(commands.get(id) ?? [])]
      const { decision, reason, systemMessage } = await ask({ session_id: id, cwd: directory, files, commands: run, attempt })
      if (typeof systemMessage === "string" && systemMessage) await toast(systemMessage)
      if (decision !== "block" || typeof reason !== "string" || !reason) {
        tries.delete(id)
        written.delete(id)
        commands.delete(id)
        return
      }
      if (attempt >= MAX_TRIES) return
      tries.set(id, attempt + 1)
      prompting.add(id) // the prompt returns when its turn ends; that turn's idle asks again
      await client.session.prompt({ path: { id }, body: { parts: [{ type: "text", text: reason }] } })
      prompting.delete(id)
      if (!again.delete(id)) return
    }
  }
  function idle(id: unknown): Promise<void> {
    if (typeof id !== "string") return Promise.resolve()
    if (prompting.has(id)) again.add(id)
    const work = running.get(id) ?? check(id).catch(() => {}).finally(() => (running.delete(id), prompting.delete(id), again.delete(id)))
    running.set(id, work)
    return work
  }
  return {
    dispose: async () => {
      try { while (running.size) await Promise.all(running.values()) } catch {}
    },
    "tool.execute.before": async (input: any, output: any) => {
      try { if (WRITERS.has(input?.tool) || input?.tool === SHELL) calls.set(input.callID, output?.args) } catch {}
    },
    "tool.execute.after": async (input: any, output: any) => {
      try {
        const args = input?.args ?? calls.get(input?.callID)
        calls.delete(input?.callID)
        const id = input?.sessionID, command = args?.command
        if (input?.tool === SHELL && typeof id === "string" && typeof command === "string")
          commands.set(id, (commands.get(id) ?? new Set<string>()).add(command))
        if (!WRITERS.has(input?.tool)) return
        note(input.sessionID, args?.filePath)
        for (const file of output?.metadata?.files ?? []) note(input.sessionID, file?.movePath ?? file?.filePath)
      } catch {}
    },
    event: async ({ event }: { event: any }) => {
      try {
        const type = event?.type, props = event?.properties
        if (type === "session.idle" || (type === "session.status" && props?.status?.type === "idle")) await idle(props?.sessionID)
      } catch {}
    },
  }
}
