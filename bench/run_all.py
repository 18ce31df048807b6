"""`make bench`: the speed benchmarks one after another (minutes each on 2 idle CPU
cores), then a list of the quality runs, which take 10 to 60 minutes each and are
started by hand.

    .venv/bin/python bench/run_all.py            # all speed benchmarks
    .venv/bin/python bench/run_all.py --only soft_attention decoding
    .venv/bin/python bench/run_all.py --list     # the commands, nothing run

Each benchmark prints its own table and writes its JSON under bench/out/; measured
numbers are collected by hand in bench/RESULTS.md with the date and machine. Not run by
CI (tests check correctness, never time).
"""

import argparse, subprocess, sys, time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SPEED = {  # name: arguments of one benchmark script (issue that sets the target)
    "soft_attention": [
        "bench_soft_attention.py"
    ],  # issue 3: train step vs reference decoder
    "scenes_step": [
        "bench_scenes_step.py"
    ],  # issue 3: the scenes preset's step, speed choices on/off
    "decoding": [
        "bench_decoding.py",
        "--feature-dims",
        "2048",
        "512",
        "--batch-sizes",
        "50",
        "100",
        "500",
    ],  # issue 3
    "ram": ["bench_ram.py", "throughput"],  # issue 4: retina vs per-image loop
    "draw": [
        "bench_draw.py",
        "--skip",
        "runs",
        "ablation",
    ],  # issue 4: images/s with/without attention
    "flickr8k_throughput": [
        "bench_flickr8k.py",
        "throughput",
    ],  # issue 6: features vs CNN online, AMP
}
QUALITY = [  # long runs (10-60 min each), listed not started
    "bench_scenes_quality.py --minutes 10 --models soft,butd --scst-minutes 5",
    "bench_scenes_quality.py --minutes 10 --models hard,hard_expected_b,"
    "hard_lambda_r0.1,hard_no_reinforce,uniform",
    "bench_scenes_quality.py --minutes 10 --models adaptive "
    "--encoder-weights bench/out/scenes_soft/best.pt",
    # after the run above: marginal_k chosen on validation
    "bench_marginal_k.py bench/out/scenes_hard/best.pt",
    "bench_flickr8k.py quality --model soft --minutes 42",
    "bench_flickr8k.py quality --model hard --minutes 55",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # issue 6: stop 25's self-critical run
    "--minutes 42 --probe-steps 0 --scst-minutes 17 --scst-temperature 0.5 "
    "--no-scst-dropout",
    # after it
    "bench_scst_gap.py --checkpoint bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_run/best.pt",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--minutes 59 --probe-steps 0",  # issue 6: stop 27's run, then
    # selection on val
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_run "
    "--candidates 3",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--minutes 59 --plan-steps 4000",  # the cosine over 4,000 steps
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_steps4000_run "
    "--candidates 3",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--mirror --minutes 59",  # and with the mirror images
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_mirror_ema0.998_run "
    "--candidates 3",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--mirror --minutes 59 --plan-steps 4000",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_mirror_ema0.998_steps4000_run "
    "--candidates 3",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--minutes 59 --plan-steps 4000 --input-dropout 0.5",  # with input dropout
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_indrop0.5_ema0.998_steps4000_run "
    "--candidates 3",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--minutes 59 --plan-steps 4000 --seed 1",  # run 2's rule, another seed
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_steps4000_seed1_run "
    "--candidates 3",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # input dropout, a longer cosine
    "--minutes 59 --plan-steps 6000 --input-dropout 0.5",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_indrop0.5_ema0.998_steps6000_run "
    "--candidates 3",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--minutes 59 --plan-steps 4000 --label-smoothing 0.1",  # with label smoothing
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ls0.1_ema0.998_steps4000_run "
    "--candidates 3",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_steps4000_run "
    "--candidates 0 "
    # every checkpoint
    "--out bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_steps4000_select_all.json",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_steps4000_seed1_run "
    "--candidates 0 --out bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_steps4000_seed1_select_all.json",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--minutes 59 --plan-steps 4000 --beta-gate",  # with the β gate (stop 32)
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_beta_ema0.998_steps4000_run",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--minutes 59 --plan-steps 4000 --seed 2",  # run 2's rule, a third seed (stop 33)
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_steps4000_seed2_run",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # b = log p(y | a, Σ α a) (stop 34)
    "--minutes 59 --plan-steps 4000 --baseline expected",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_bexp_pool50_ema0.998_steps4000_run",
    "bench_baseline_variance.py --checkpoint bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_bexp_pool50_ema0.998_steps4000_run/"
    "val_step3000.pt",
    "bench_flickr8k.py quality --model hard --lambda-r 1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # the same at the paper's λ_r (stop 34)
    "--minutes 59 --plan-steps 4000 --baseline expected",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_warmup500_rtg_bexp_pool50_ema0.998_steps4000_run",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # a 1,024-unit LSTM in bf16 (stop 35; also --seed 1)
    "--minutes 59 --plan-steps 4000 --hidden-dim 1024 --amp",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_run",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # its third seed (stop 36)
    "--minutes 59 --plan-steps 4000 --hidden-dim 1024 --amp --seed 2",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_seed2_run",
    "bench_flickr8k.py ensemble --runs bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_run "
    # two seeds as one (stop 36)
    "bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_seed1_run",
    "bench_flickr8k.py quality --model hard --encoder efficientnet-lite2 "
    "--lambda-r 0.1 --expected-warmup 500 --credit reward_to_go "
    # the same on Lite2 9x9 features (stop 37)
    "--length-pool 50 --ema 0.998 --minutes 59 --plan-steps 4000 "
    "--hidden-dim 1024 --amp",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_efficientnet-lite2_pool50_ema0.998_h1024_amp_steps4000_run",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    "--minutes 59 --plan-steps 4000 --amp",  # bf16 alone at 512 units (stop 37)
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_amp_steps4000_run",
    "bench_flickr8k.py ensemble --runs bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_run "
    "bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_seed1_run"
    # all three
    " bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_seed2_run",
    "bench_flickr8k.py quality --model soft --length-pool 50 --ema 0.998 "
    "--minutes 59 --plan-steps 4000 --hidden-dim 1024 --amp",
    # soft under the hard rule (stop 38; also --seed 1)
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_soft_pool50_ema0.998_h1024_amp_steps4000_run",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_soft_pool50_ema0.998_h1024_amp_steps4000_seed1_run",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "2000 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # a soft warm-up of half the run (stop 38)
    "--minutes 59 --plan-steps 4000 --hidden-dim 1024 --amp",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup2000_rtg_pool50_ema0.998_h1024_amp_steps4000_run",
    "bench_flickr8k.py ensemble --runs bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_run "
    "bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup2000_rtg_pool50_ema0.998_h1024_amp_steps4000_run "
    # the two seed-0 runs as one
    "--out bench/out/flickr8k_hard_h1024_warmup500_plus_warmup2000_ensemble2.json",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # the paper's optimizer, its code's step (stop 39)
    "--minutes 59 --plan-steps 4000 --hidden-dim 1024 --amp --optimizer "
    "rmsprop --lr 1e-4",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_rmsprop_lr0.0001_run",
    "bench_flickr8k.py quality --model hard --lambda-r 0.1 --expected-warmup "
    "500 --credit reward_to_go --length-pool 50 --ema 0.998 "
    # the same over the whole 59 minutes
    "--minutes 59 --hidden-dim 1024 --amp --optimizer rmsprop --lr 1e-4",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_rmsprop_lr0.0001_run",
    "bench_flickr8k.py quality --model hard --objective marginal "
    "--marginal-k 8 --length-pool 50 --ema 0.998 "
    # trained by the per-step marginal (stop 40)
    "--minutes 59 --plan-steps 4000 --hidden-dim 1024 --amp",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_marginal8_pool50_ema0.998_h1024_amp_steps4000_run",
    "bench_flickr8k.py quality --model hard --objective marginal "
    "--marginal-k 8 --length-pool 50 --ema 0.998 --minutes 59 "
    "--plan-steps 1000 --lr 1e-4 --hidden-dim 1024 --amp --init-from "
    # as a last phase (stop 40)
    "bench/out/"
    "flickr8k_hard_lambda_r0.1_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_run/"
    "val_step2500.pt",
    "bench_flickr8k.py select --run bench/out/"
    "flickr8k_hard_marginal8_pool50_ema0.998_h1024_amp_steps1000_lr0.0001_from_hard_lambda_r0.1"
    "_warmup500_rtg_pool50_ema0.998_h1024_amp_steps4000_val_step2500_run",
    "bench_ram.py train --task translated --minutes 10",
    "bench_draw.py --skip throughput ablation --minutes 4.5",
    # exact resume on a GPU (stop 35; a check, minutes)
    "bench_resume.py --device cuda --model hard --amp-dtype fp16 --deterministic",
]


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--only", nargs="+", choices=list(SPEED), help="run only these speed benchmarks"
    )
    p.add_argument("--list", action="store_true", help="print the commands and exit")
    args = p.parse_args(argv)
    cmds = {
        name: [sys.executable, str(HERE / SPEED[name][0]), *SPEED[name][1:]]
        for name in args.only or SPEED
    }
    if args.list:
        for cmd in cmds.values():
            print(" ".join(cmd))
    failed = []
    for name, cmd in ({} if args.list else cmds).items():
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=HERE.parent)
        print(
            f"=== {name}: exit {r.returncode} after {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        if r.returncode:
            failed.append(name)
    print("\nQuality runs (10 to 60 minutes each; start them by hand):")
    for q in QUALITY:
        print(f"  {sys.executable} {HERE / q.split()[0]} {' '.join(q.split()[1:])}")
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
