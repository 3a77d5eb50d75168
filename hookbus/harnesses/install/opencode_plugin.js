// hookbus: sends this agent's hook points to the hookbus fleet and applies its answers.
// Written by `hookbus __CLI__ install`; `hookbus __CLI__ uninstall` removes it. Edits are
// lost on the next install. It has no dependency, so it loads without any npm install.
//
// Each hook point in HOOKBUS.points is sent as {"hook", "input", "output"} JSON, to its
// hook command on stdin (point.command) or to the gateway (point.url). Its answer:
// {"block": reason} throws Error(reason) (the tool call does not run and the model reads
// the reason); {"args": {...}} rewrites the tool input; {"context": text} joins this
// session's system prompt; {"systemMessage": text} is logged. A guard point fails closed:
// when hookbus cannot start, answers nothing readable or not within its wait (the CLI has
// no hook timeout of its own), the call is blocked.
import { spawn } from "node:child_process";

const HOOKBUS = /* hookbus-config */ __CONFIG__ /* end hookbus-config */;

const UNAVAILABLE = (why) =>
  `hookbus is unavailable (${why}); blocked because this hook fails closed`;

function tail(text) {
  return String(text || "").trim().split("\n").slice(-3).join(" ").slice(-400);
}

function stop(child) {
  if (!child) return;
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch (e) {
    child.kill("SIGKILL");
  }
  child.stdout.destroy();
  child.stderr.destroy();
}

function viaCommand(command, body, waitMs) {
  return new Promise((resolve) => {
    let child;
    let done = false;
    const finish = (result) => {
      if (!done) {
        done = true;
        clearTimeout(timer);
        resolve(result);
      }
    };
    const timer = setTimeout(() => {
      finish({ error: `no answer within ${waitMs / 1000} s` });
      stop(child);
    }, waitMs);
    try {
      // its own process group, so that a timeout ends the shell and what it started
      child = spawn("/bin/sh", ["-c", command], { stdio: ["pipe", "pipe", "pipe"], detached: true });
    } catch (err) {
      finish({ error: `hookbus could not start: ${err.message}` });
      return;
    }
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    child.on("error", (e) => finish({ error: `hookbus could not start: ${e.message}` }));
    child.on("close", (code) => {
      if (!out.trim()) {
        finish(code === 0 ? { answer: {} } : { error: `hookbus exited ${code}: ${tail(err)}` });
        return;
      }
      try {
        finish({ answer: JSON.parse(out) });
      } catch (e) {
        finish({ error: `hookbus answered no JSON (exit ${code}): ${tail(out)}` });
      }
    });
    child.stdin.on("error", () => {});
    child.stdin.end(body);
  });
}

async function viaGateway(url, body, waitMs) {
  const headers = { "Content-Type": "application/json" };
  const token = process.env.HOOKBUS_GATEWAY_TOKEN;
  if (token) headers.Authorization = `Bearer ${token}`;
  try {
    const response = await fetch(url, {
      method: "POST",
      headers,
      body,
      signal: AbortSignal.timeout(waitMs),
    });
    if (!response.ok) return { error: `the gateway answered HTTP ${response.status}` };
    return { answer: await response.json() };
  } catch (e) {
    return { error: `the gateway did not answer: ${e.message}` };
  }
}

async function ask(point, hook, input, output) {
  let body;
  try {
    body = JSON.stringify({ hook, input, output });
  } catch (e) {
    return { error: `the ${hook} input could not be sent: ${e.message}` };
  }
  const waitMs = point.wait_s * 1000;
  const got = point.url
    ? await viaGateway(point.url, body, waitMs)
    : await viaCommand(point.command, body, waitMs);
  if (got.answer !== undefined && (got.answer === null || typeof got.answer !== "object")) {
    return { error: "hookbus answered something that is not a JSON object" };
  }
  return got;
}

function note(text) {
  if (text) console.error(`hookbus: ${text}`);
}

export const HookbusPlugin = async () => {
  const context = new Map(); // session id -> context the fleet added, for its system prompt

  async function send(name, hook, input, output) {
    const point = HOOKBUS.points[name];
    if (!point) return {};
    const got = await ask(point, hook, input, output);
    if (got.error !== undefined) {
      if (point.guard) throw new Error(UNAVAILABLE(got.error));
      note(`${got.error}; ${name} passes`);
      return {};
    }
    const answer = got.answer;
    note(answer.systemMessage);
    if (typeof answer.context === "string" && answer.context && input && input.sessionID) {
      const added = context.get(input.sessionID) || [];
      added.push(answer.context);
      context.set(input.sessionID, added);
    }
    if (point.request && typeof answer.block === "string") throw new Error(answer.block);
    return answer;
  }

  const hooks = {
    "experimental.chat.system.transform": async (input, output) => {
      const added = input && input.sessionID ? context.get(input.sessionID) : undefined;
      if (added && output && Array.isArray(output.system)) output.system.push(...added);
    },
  };
  const direct = Object.keys(HOOKBUS.points).filter((name) => HOOKBUS.points[name].hook !== "event");
  for (const name of direct) {
    hooks[name] = async (input, output) => {
      const answer = await send(name, name, input, output);
      if (answer.args && typeof answer.args === "object" && output && output.args) {
        for (const key of Object.keys(output.args)) delete output.args[key];
        Object.assign(output.args, answer.args);
      }
    };
  }
  hooks.event = async (input) => {
    const type = input && input.event ? input.event.type : undefined;
    if (typeof type === "string" && HOOKBUS.points[type]) {
      await send(type, "event", input, null);
    }
  };
  return hooks;
};
