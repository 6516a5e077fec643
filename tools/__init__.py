"""Developer tools: offline preview of the Pulumi program under the mock runtime."""
