# bench/bench-summary.awk: make bench's one results.jsonl line from the lines its runs
# printed (ours and PyTorch's), with the ratios; a figure the run did not measure (bf16 on a
# CPU without it) is null. Variables (-v): commit cpu family cmodel isa cores coretype
# autocore envcore probe torch_blas torch_malloc. bench/bench.sh runs it; tests/test_cli.c
# feeds it made-up lines.
function num(s, k,   m) { if (match(s, "\"" k "\": ?[0-9.]+")) { m = substr(s, RSTART, RLENGTH); sub(/.*: ?/, "", m); return m } return "" }
function has(s, t) { return index(s, t) > 0 }
function v(x) { return x == "" ? "null" : x } # a figure this run did not measure (bf16 on a CPU without it)
function ratio(a, b) { return a == "" || b == "" || b == 0 ? "null" : sprintf("%.2f", a / b) }
/"event":"train"/ { p = has($0, "\"bf16\"") ? "bf16" : has($0, "\"openblas\"") ? "openblas" : "fp32"; tok[p] = num($0, "tok_per_s"); rss[p] = num($0, "peak_rss_mb")
                    gf[p] = num($0, "gemm_gflops"); if (p != "openblas") sg = num($0, "sgemm_gflops_output_shape")
                    else osg = num($0, "sgemm_gflops_output_shape")
                    if (p == "bf16") bg = num($0, "bf16_gemm_gflops_output_shape") }
/"event":"peak"/ { pk32 = num($0, "f32_gflops"); pk16 = num($0, "bf16_gflops"); pk8 = num($0, "int8_gops") }
/"event":"train_low_memory"/ { lctok = num($0, "tok_per_s"); lcrss = num($0, "peak_rss_mb") }
/"event":"train_mpi2"/ { p = has($0, "\"bf16\"") ? "bf16" : "fp32"; mtok[p] = num($0, "tok_per_s"); msum[p] = num($0, "sum_ms_per_batch"); mms[p] = num($0, "ms_per_batch") }
/"event":"train_mpi2_overlap"/ { ovtok = num($0, "tok_per_s"); ovsum = num($0, "sum_ms_per_batch"); ovms = num($0, "ms_per_batch") }
/"event":"train"/ && !has($0, "\"ranks\":2") && !has($0, "\"bf16\"") && !has($0, "\"openblas\"") { params = num($0, "params"); btok = num($0, "trg_tokens") / num($0, "batches") }
/"event":"train_10x"/ { tok10 = num($0, "tok_per_s"); params10 = num($0, "params") }
/"event":"dist_sum"/ { k = (has($0, "\"tcp\"") ? "tcp" : "shm") (has($0, "\"10x\"") ? "_10x" : num($0, "floats") == 1 ? "_lat" : ""); dsum[k] = num($0, "ms"); dadd[k] = num($0, "add_ms") }
/"event":"train_transformer"/ { p = has($0, "\"bf16\"") ? "bf16" : "fp32"; tftok[p] = num($0, "tok_per_s"); tfrss[p] = num($0, "peak_rss_mb") }
/"event": "bench_transformer"/ { p = has($0, "--bf16") ? "bf16" : "fp32"; ttftok[p] = num($0, "tok_per_s") }
/"event":"decode"/ { p = has($0, "\"bf16\"") ? "bf16" : has($0, "\"int8\"") ? "int8" : "fp32"; md = has($0, "greedy_full") ? "full" : has($0, "\"beam\":5") ? "beam5" : "greedy"
                     dec[p "_" md] = num($0, "sent_per_s") }
/"event":"decode_trained"/ { p = has($0, "\"bf16\"") ? "bf16" : has($0, "\"int8\"") ? "int8" : "fp32"; md = has($0, "greedy_full") ? "full" : has($0, "\"beam\":5") ? "beam5" : "greedy"
                     tdec[p "_" md] = num($0, "sent_per_s") }
/"event": "bench"/ { p = has($0, "--bf16") ? "bf16" : "fp32"; ttok[p] = num($0, "tok_per_s"); trss[p] = num($0, "peak_rss_mb") }
/"event": "decode_bench"/ { tg = num($0, "sent_per_s") }
/"event":"decode_b1000"/ { p = has($0, "\"bf16\"") ? "bf16" : "fp32"; md = has($0, "greedy_full") ? "full" : has($0, "\"beam\":5") ? "beam5" : "greedy"
                     bdec[p "_" md] = num($0, "sent_per_s") }
/"event": "decode_bench_b1000"/ { tg1000 = num($0, "sent_per_s") }
/"event":"train_busy"/ { btk = num($0, "tok_per_s") }
/"event":"train_busy_t1"/ { btk1 = num($0, "tok_per_s") }
/"event":"decode_busy"/ { md = has($0, "greedy_full") ? "full" : "beam5"; bsy[md] = num($0, "sent_per_s") }
/"event": "bench_busy"/ { tbtk = num($0, "tok_per_s") }
/"event": "decode_bench_busy"/ { tbg = num($0, "sent_per_s") }
/"event": "python_translate"/ { b = num($0, "beam"); pyr[b] = num($0, "python_vs_translate"); pys[b] = num($0, "python_s"); cls[b] = num($0, "translate_s"); pyid = pyid (has($0, "\"identical\": true") ? "" : "no") }
END {
    printf "{\"commit\":\"%s\",\"cpu\":\"%s\",\"cpu_family\":%s,\"cpu_model\":%s,\"cpu_isa\":\"%s\",\"cores\":%s,\"openblas_coretype\":\"%s\"", commit, cpu, family, cmodel, isa, cores, coretype
    if (probe != "") printf ",\"openblas_auto_core\":\"%s\",\"openblas_env_coretype\":\"%s\",\"openblas_sgemm_gflops_by_core\":\"%s\"", autocore, envcore, probe
    printf ",\"train_tok_per_s\":%s,\"train_bf16_tok_per_s\":%s,\"peak_rss_mb\":%s,\"step_gemm_gflops\":%s,\"sgemm_gflops\":%s,\"bf16_gemm_gflops\":%s", tok["fp32"], v(tok["bf16"]), rss["fp32"], gf["fp32"], sg, v(bg)
    if (gf["bf16"] != "") printf ",\"step_gemm_bf16_gflops\":%s", gf["bf16"]
    # the step's products over its whole time against the CPU's peak (bench/peak.c): 1 / share
    # is the most any change could gain that makes the same products
    if (pk32 != "") printf ",\"peak_f32_gflops\":%s,\"peak_bf16_gflops\":%s,\"peak_int8_gops\":%s,\"step_gemm_of_peak\":%s,\"sgemm_of_peak\":%s,\"step_gemm_bf16_of_peak\":%s,\"bf16_gemm_of_peak\":%s", pk32, v(pk16), v(pk8), ratio(gf["fp32"], pk32), ratio(sg, pk32), ratio(gf["bf16"], pk16), ratio(bg, pk16)
    if (lctok != "") printf ",\"train_low_memory_tok_per_s\":%s,\"peak_rss_low_memory_mb\":%s", lctok, lcrss
    if (mtok["fp32"] != "") printf ",\"train_mpi2_tok_per_s\":%s,\"train_mpi2_vs_one_process\":%.2f,\"mpi2_sum_share\":%.3f", mtok["fp32"], mtok["fp32"] / tok["fp32"], msum["fp32"] / mms["fp32"]
    if (ovtok != "") printf ",\"train_mpi2_overlap_tok_per_s\":%s,\"mpi2_overlap_sum_share\":%.3f", ovtok, ovsum / ovms
    if (mtok["bf16"] != "") printf ",\"train_mpi2_bf16_tok_per_s\":%s,\"train_mpi2_bf16_vs_one_process\":%.2f,\"mpi2_bf16_sum_share\":%.3f", mtok["bf16"], mtok["bf16"] / tok["bf16"], msum["bf16"] / mms["bf16"]
    if (params != "") printf ",\"params\":%s,\"batch_trg_tokens\":%.1f", params, btok
    if (dsum["shm"] != "") printf ",\"sum_shm_ms\":%s,\"sum_tcp_ms\":%s,\"sum_add_ms\":%s,\"sum_shm_latency_ms\":%s,\"sum_tcp_latency_ms\":%s", dsum["shm"], dsum["tcp"], dadd["shm"], dsum["shm_lat"], dsum["tcp_lat"]
    if (tok10 != "") printf ",\"params_10x\":%s,\"train_10x_tok_per_s\":%s,\"sum_shm_10x_ms\":%s,\"sum_tcp_10x_ms\":%s,\"sum_add_10x_ms\":%s", params10, tok10, dsum["shm_10x"], dsum["tcp_10x"], dadd["shm_10x"]
    printf ",\"train_openblas_tok_per_s\":%s,\"step_gemm_openblas_gflops\":%s,\"sgemm_openblas_gflops\":%s", tok["openblas"], gf["openblas"], osg
    printf ",\"random_greedy_full_sent_per_s\":%s,\"random_greedy_full_bf16_sent_per_s\":%s,\"random_beam5_sent_per_s\":%s,\"random_beam5_bf16_sent_per_s\":%s", dec["fp32_full"], v(dec["bf16_full"]), dec["fp32_beam5"], v(dec["bf16_beam5"])
    if (dec["int8_full"] != "") printf ",\"random_greedy_full_int8_sent_per_s\":%s", dec["int8_full"] # its weights are not the others (no training first): only the fixed-length run compares
    if (tdec["fp32_greedy"] != "") printf ",\"trained_greedy_sent_per_s\":%s,\"trained_greedy_bf16_sent_per_s\":%s,\"trained_beam5_sent_per_s\":%s,\"trained_beam5_bf16_sent_per_s\":%s", tdec["fp32_greedy"], v(tdec["bf16_greedy"]), tdec["fp32_beam5"], v(tdec["bf16_beam5"])
    if (tdec["int8_greedy"] != "") printf ",\"trained_greedy_int8_sent_per_s\":%s,\"trained_beam5_int8_sent_per_s\":%s", tdec["int8_greedy"], tdec["int8_beam5"]
    if (torch_blas != "") printf ",\"torch_blas\":\"%s\"", torch_blas
    if (torch_malloc != "") printf ",\"torch_malloc\":\"%s\"", torch_malloc
    if (ttok["fp32"] != "") printf ",\"torch_train_tok_per_s\":%s,\"torch_peak_rss_mb\":%s,\"train_ratio\":%.2f,\"rss_ratio\":%.2f", ttok["fp32"], trss["fp32"], tok["fp32"] / ttok["fp32"], rss["fp32"] / trss["fp32"]
    if (ttok["fp32"] != "" && lcrss != "") printf ",\"rss_low_memory_ratio\":%.2f", lcrss / trss["fp32"]
    if (ttok["bf16"] != "") printf ",\"torch_train_bf16_tok_per_s\":%s,\"train_bf16_ratio\":%s", ttok["bf16"], ratio(tok["bf16"], ttok["bf16"])
    if (tftok["fp32"] != "") printf ",\"transformer_train_tok_per_s\":%s,\"transformer_train_bf16_tok_per_s\":%s,\"transformer_peak_rss_mb\":%s", tftok["fp32"], v(tftok["bf16"]), tfrss["fp32"]
    if (ttftok["fp32"] != "") printf ",\"torch_transformer_train_tok_per_s\":%s,\"transformer_train_ratio\":%.2f", ttftok["fp32"], tftok["fp32"] / ttftok["fp32"]
    if (ttftok["bf16"] != "") printf ",\"torch_transformer_train_bf16_tok_per_s\":%s,\"transformer_train_bf16_ratio\":%s", ttftok["bf16"], ratio(tftok["bf16"], ttftok["bf16"])
    if (tg != "") printf ",\"torch_random_greedy_sent_per_s\":%s,\"greedy_full_ratio\":%.2f,\"greedy_full_bf16_ratio\":%s,\"beam5_vs_torch_greedy\":%.2f,\"beam5_bf16_vs_torch_greedy\":%s", tg, dec["fp32_full"] / tg, ratio(dec["bf16_full"], tg), dec["fp32_beam5"] / tg, ratio(dec["bf16_beam5"], tg)
    if (tg != "" && dec["int8_full"] != "") printf ",\"greedy_full_int8_ratio\":%.2f", dec["int8_full"] / tg
    if (bdec["fp32_full"] != "") printf ",\"random_greedy_full_b1000_sent_per_s\":%s,\"random_greedy_full_b1000_bf16_sent_per_s\":%s,\"random_beam5_b1000_sent_per_s\":%s,\"random_beam5_b1000_bf16_sent_per_s\":%s", bdec["fp32_full"], v(bdec["bf16_full"]), bdec["fp32_beam5"], v(bdec["bf16_beam5"])
    if (tg1000 != "") printf ",\"torch_random_greedy_b1000_sent_per_s\":%s,\"greedy_full_b1000_ratio\":%.2f,\"greedy_full_b1000_bf16_ratio\":%s", tg1000, bdec["fp32_full"] / tg1000, ratio(bdec["bf16_full"], tg1000)
    # beside one busy process: each against its quiet figure, ours against PyTorch's under the same load
    if (btk != "") printf ",\"busy_load\":1,\"train_busy_tok_per_s\":%s,\"train_busy_of_quiet\":%s,\"train_busy_threads1_tok_per_s\":%s,\"train_busy_vs_threads1\":%s,\"random_greedy_full_busy_sent_per_s\":%s,\"greedy_full_busy_of_quiet\":%s,\"random_beam5_busy_sent_per_s\":%s,\"beam5_busy_of_quiet\":%s", btk, ratio(btk, tok["fp32"]), v(btk1), ratio(btk, btk1), v(bsy["full"]), ratio(bsy["full"], dec["fp32_full"]), v(bsy["beam5"]), ratio(bsy["beam5"], dec["fp32_beam5"])
    if (tbtk != "") printf ",\"torch_train_busy_tok_per_s\":%s,\"torch_train_busy_of_quiet\":%s,\"train_busy_ratio\":%s", tbtk, ratio(tbtk, ttok["fp32"]), ratio(btk, tbtk)
    if (tbg != "") printf ",\"torch_random_greedy_busy_sent_per_s\":%s,\"greedy_full_busy_ratio\":%s", tbg, ratio(bsy["full"], tbg)
    if (pyr[1] != "") printf ",\"python_translate_s\":%s,\"translate_s\":%s,\"python_vs_translate\":%s,\"python_beam5_vs_translate\":%s,\"python_identical\":%s", pys[1], cls[1], pyr[1], v(pyr[5]), pyid == "" ? "true" : "false"
    printf "}\n"
}
