"""Pictures of BERT-EMD training: the final flow matrix and the layer-weight trajectories."""

from __future__ import annotations

import os


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, output_dir: str, filename: str) -> str:
    """Write the figure as a PNG in the output folder and free it."""
    fig.tight_layout()
    os.makedirs(output_dir, exist_ok=True)
    path = os.path.join(output_dir, filename)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_emd_flow(component, output_dir: str, filename: str = "emd_flow.png") -> str | None:
    """Heatmap of the last flow F (student layers x teacher layers), one panel per kind."""
    flows = {kind: flow.detach().float().cpu().numpy() for kind, flow in component.last_flows.items()}
    if not flows:
        return None
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(flows), figsize=(4.2 * len(flows), 3.2), squeeze=False)
    for ax, (kind, flow) in zip(axes[0], flows.items()):
        image = ax.imshow(flow, cmap="viridis", aspect="auto")
        ax.set_title(f"EMD flow ({kind})")
        ax.set_xlabel("teacher layer")
        ax.set_ylabel("student layer")
        ax.set_xticks(range(flow.shape[1]), [str(j + 1) for j in range(flow.shape[1])])
        ax.set_yticks(range(flow.shape[0]), [str(i + 1) for i in range(flow.shape[0])])
        for i in range(flow.shape[0]):
            for j in range(flow.shape[1]):
                ax.text(j, i, f"{flow[i, j]:.2f}", ha="center", va="center", color="white", fontsize=7)
        fig.colorbar(image, ax=ax)
    return _save(plt, fig, output_dir, filename)


def plot_layer_weights(history: list[dict], output_dir: str, filename: str = "emd_layer_weights.png") -> str | None:
    """Trajectories of every layer weight over the optimizer steps."""
    if not history:
        return None
    plt = _pyplot()
    series = [key for key in history[0] if key != "step"]
    fig, axes = plt.subplots(1, len(series), figsize=(4.0 * len(series), 3.0), squeeze=False)
    steps = [entry["step"] for entry in history]
    for ax, key in zip(axes[0], series):
        for layer in range(len(history[0][key])):
            ax.plot(steps, [entry[key][layer] for entry in history], label=f"layer {layer + 1}")
        ax.set_title(key.replace("_", " "))
        ax.set_xlabel("step")
        ax.legend(fontsize=6)
    return _save(plt, fig, output_dir, filename)
