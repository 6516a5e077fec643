import * as pulumi from "@pulumi/pulumi";
import * as tpu from "@pulumi/gke-tpu-priority";

// The project id as another stack's output (the stack that made the project): `platform.project` is typed
// Input<string>, so it takes an Output as well as a plain string.
const projects = new pulumi.StackReference("my-org/gcp-projects/prod");
const project = projects.requireOutput("projectId");

// BEGIN platform settings (checked against components/schema.json by `make test`)
const platform = new tpu.TpuPlatform("training", {
    platform: {
        project: project,
        region: "us-east5",
        cluster: {
            name: "tpu-ts",
            releaseChannel: "REGULAR",
            controlPlaneAccess: "dns",
        },
        tpuPools: [
            {
                name: "train-4x4",
                topology: "4x4",
                slices: 2,
                zone: "us-east5-b",
                capacity: { mode: "spot" },
                scaleToZero: true,
            },
            {
                name: "flex-8x8",
                topology: "8x8",
                slices: 1,
                zone: "us-east5-b",
                capacity: { mode: "flex-start", maxRunDuration: "86400s" },
            },
        ],
        hotswap: { mode: "reconciler", replicas: 2 },
    },
});
// END platform settings

export const clusterName = platform.clusterName;
export const kubeconfig = platform.kubeconfig;
export const clusterQueues = platform.clusterQueues;
