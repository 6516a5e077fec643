// Runs index.ts under Pulumi's mock runtime (no Pulumi CLI, language host, provider or cloud account; nothing is
// deployed) and prints every resource it registers with its inputs, and its exports:
//
//     npm run preview -- [--stack-output NAME=VALUE ...] [--stack NAME] [--report FILE]
//
// A stack reference's outputs come from `--stack-output` (the values the other stack would hold). The
// gke-tpu-priority components are not run here: each output of one is the reference `${<name>.<output>}`, which
// `python ../preview.py` replaces with what the component computes when it runs the recorded inputs through the
// component itself (under Python's mock runtime). `--report FILE` writes the run as JSON for that step.
import * as fs from "node:fs";
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";

const PROJECT = "tpu-platform-typescript";
const PACKAGE = "gke-tpu-priority:";
const STACK_REFERENCE = "pulumi:pulumi:StackReference";

interface Registered {
    type: string;
    name: string;
    custom: boolean;
    inputs: Record<string, unknown>;
}

interface Options {
    stack: string;
    stackOutputs: Record<string, string>;
    report?: string;
}

function fail(message: string): never {
    console.error(`error: ${message}`);
    process.exit(2);
}

function parseOptions(argv: string[]): Options {
    const options: Options = { stack: "dev", stackOutputs: {} };
    for (let i = 0; i < argv.length; i++) {
        const flag = argv[i];
        const value = argv[i + 1];
        if (value === undefined || !["--stack-output", "--stack", "--report"].includes(flag)) {
            fail(`unexpected argument ${JSON.stringify(flag)}; expected --stack-output NAME=VALUE, --stack NAME or --report FILE`);
        }
        i++;
        if (flag === "--stack") {
            options.stack = value;
        } else if (flag === "--report") {
            options.report = value;
        } else {
            const eq = value.indexOf("=");
            if (eq < 1) {
                fail(`--stack-output ${JSON.stringify(value)}: expected NAME=VALUE, e.g. projectId=my-tpu-project`);
            }
            options.stackOutputs[value.slice(0, eq)] = value.slice(eq + 1);
        }
    }
    return options;
}

// The component package this example uses (Pulumi.yaml `packages:`), from the compiled file in bin/.
const SCHEMA = path.resolve(__dirname, "..", "..", "..", "components", "schema.json");

// The component's outputs, as the schema names them, each a reference to be resolved by the component's own run.
function componentOutputs(type: string, name: string): Record<string, string> {
    const schema = JSON.parse(fs.readFileSync(SCHEMA, "utf8"));
    const properties = Object.keys(schema.resources?.[type]?.properties ?? {});
    return Object.fromEntries(properties.map((p) => [p, `\${${name}.${p}}`]));
}

// What went wrong in the program, in one sentence; a stack reference's output not given says how to give it.
function programError(err: unknown): string {
    const message = err instanceof Error ? err.message : String(err);
    const missing = /Required output '([^']+)' does not exist on stack '([^']+)'/.exec(message);
    if (missing) {
        return `stack reference ${JSON.stringify(missing[2])}: its output '${missing[1]}' is not known offline; pass --stack-output ${missing[1]}=<the value that stack exports>`;
    }
    return `index.ts under the mock runtime: ${message}`;
}

function resolved(value: unknown): Promise<unknown> {
    return pulumi.Output.isInstance(value)
        ? new Promise((resolve) => (value as pulumi.Output<unknown>).apply(resolve))
        : Promise.resolve(value);
}

async function main(): Promise<void> {
    const options = parseOptions(process.argv.slice(2));
    const registered: Registered[] = [];
    process.on("unhandledRejection", (err) => fail(programError(err)));
    await pulumi.runtime.setMocks(
        {
            newResource(args: pulumi.runtime.MockResourceArgs): pulumi.runtime.MockResourceResult {
                registered.push({ type: args.type, name: args.name, custom: args.custom ?? false, inputs: args.inputs });
                if (args.type === STACK_REFERENCE) {
                    const state = { ...args.inputs, outputs: options.stackOutputs, secretOutputNames: [] };
                    return { id: String(args.inputs.name ?? args.name), state };
                }
                if (args.type.startsWith(PACKAGE)) {
                    return { id: undefined, state: { ...args.inputs, ...componentOutputs(args.type, args.name) } };
                }
                return { id: `${args.name}-id`, state: args.inputs };
            },
            call(args: pulumi.runtime.MockCallArgs): Record<string, unknown> {
                fail(`${args.token}: a function call has no offline answer here; run \`pulumi preview\` for it`);
            },
        },
        PROJECT,
        options.stack,
        false,
    );
    // Loaded only now: the program registers its resources as it is evaluated, and the mocks must be in place.
    const program: Record<string, unknown> = require("./index");
    const exports: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(program)) {
        exports[key] = await resolved(value);
    }
    const run = { project: PROJECT, stack: options.stack, resources: registered, outputs: exports };
    if (options.report) {
        fs.writeFileSync(options.report, JSON.stringify(run, null, 2) + "\n");
    }
    console.log(`Program '${PROJECT}' (nodejs), stack '${options.stack}', under Pulumi's mock runtime:`);
    for (const r of registered) {
        console.log(`  ${r.type} ${r.name}`);
    }
    console.log("Outputs:");
    for (const [key, value] of Object.entries(exports)) {
        console.log(`  ${key}: ${JSON.stringify(value)}`);
    }
}

main().catch((err) => fail(programError(err)));
