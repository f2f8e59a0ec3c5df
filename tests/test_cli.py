"""cli.cli_main: how a CLI's run ends when a signal lands in library code that turns it into another exception or
loses it (`preemption.stops_raised`), when one comes after its body, and when memory runs out."""

import collections.abc
import errno
import gc
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import types
import weakref

import pytest
import tensorflow as tf
from absl import flags as absl_flags

import cli
import path_flags
import run_files
from xlnet_tf.training import inference
from xlnet_tf.training import preemption


def _signal_turned_into(kind):
  def body(_):
    converted = False
    try:
      os.kill(os.getpid(), signal.SIGINT)  # cli_main's handler raises preemption.Stopped here
      time.sleep(5)
    except:  # pylint: disable=bare-except  # as TensorFlow's DType.max: a bare except that raises TypeError
      if kind == "chained":
        raise TypeError("Cannot find maximum value of <dtype: 'int32'>.")  # pylint: disable=raise-missing-from
      converted = True
    if converted:  # raised outside the except block: no __context__ leads back to the signal
      raise ValueError("a file list of ['f', 'n']")
    raise AssertionError("the signal did not arrive")
  return body


@pytest.mark.parametrize("where", ["outside_the_loop", "after_saving"])
def test_what_a_stop_by_a_signal_interrupted_is_never_torn_down(where, capsys):
  """A SIGTERM during --eval_all_ckpt once ended in `corrupted size vs. prev_size in fastbins`, exit 134, no line
  (sweep 23, B3), and a training run stopped after saving took 26 s to end after 19k steps (sweep 19, F2): what they
  interrupted was torn down before the process ended. It stays alive until os._exit."""
  freed = []

  def body(options):
    del options
    held = type("Held", (), {})()
    weakref.finalize(held, freed.append, "held")
    if where == "after_saving":
      raise preemption.stopped(signal.SIGTERM, 3, "m/ckpt-3")  # the training loop's, `held` a local
    os.kill(os.getpid(), signal.SIGTERM)  # cli_main's handler raises preemption.Stopped here, `held` a local
    time.sleep(5)

  absl_flags.FLAGS.mark_as_parsed()
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", body)(["tool.py"])
  assert ended.value.code == 128 + signal.SIGTERM
  assert capsys.readouterr().err.strip().splitlines()[-1].startswith("tool.py: stopped by SIGTERM")
  del ended
  gc.collect()
  assert not freed


@pytest.mark.parametrize("kind", ["chained", "unchained"])
@pytest.mark.usefixtures("stop_signals_default")
def test_a_signal_turned_into_another_exception_ends_as_the_stop(kind, capsys):
  absl_flags.FLAGS.mark_as_parsed()
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", _signal_turned_into(kind))(["tool.py"])
  assert ended.value.code == 128 + signal.SIGINT
  assert capsys.readouterr().err.strip().splitlines()[-1].startswith("tool.py: stopped by SIGINT; files are written")
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_error_without_a_signal_is_still_an_error(capsys):
  absl_flags.FLAGS.mark_as_parsed()
  def body(_):
    raise ValueError("--flag must be positive.")
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", body)(["tool.py"])
  assert ended.value.code == 1
  assert capsys.readouterr().err.strip().splitlines()[-1] == "tool.py: error: --flag must be positive."


@pytest.mark.parametrize("body, line", [
    (lambda _: tf.zeros([2 ** 46]),  # out of memory outside a training step or evaluation (which name their flags)
     "tool.py: error: Out of memory (OOM when allocating tensor with shape[70368744177664] and type float on CPU:0 by "
     "allocator cpu): the device cannot hold what the run needs. Make its batches or sequences smaller, or run on a "
     "device with more memory."),
    (lambda _: [0] * 2 ** 62, "tool.py: error: Out of memory (Python's MemoryError): the device cannot hold what "
                              "the run needs. Make its batches or sequences smaller, or run on a device with more "
                              "memory.")], ids=["tensorflow", "python"])
def test_out_of_memory_is_one_line(body, line, capsys):
  absl_flags.FLAGS.mark_as_parsed()
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", body)(["tool.py"])
  assert ended.value.code == 1
  last = capsys.readouterr().err.strip().splitlines()[-1]
  assert last.replace("allocator mklcpu", "allocator cpu") == line  # mklcpu: TensorFlow's where oneDNN is on


def _lose_a_sigint():
  """A Ctrl-C that the code it landed in swallows, as TensorFlow's C code clears it (`TFE_Py_FastPathExecute`)."""
  try:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(5)
  except:  # pylint: disable=bare-except
    return
  raise AssertionError("the signal did not arrive")


def test_a_stop_lost_before_the_loop_stops_the_loop(capsys):
  """A Ctrl-C that the code it landed in lost: the training loop that would start next does not start
  (`StopRequest` raises the stop); afterwards a loop starts as before."""
  absl_flags.FLAGS.mark_as_parsed()
  entered = []
  def body(_):
    _lose_a_sigint()
    with preemption.StopRequest():
      entered.append(True)
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", body)(["tool.py"])
  assert ended.value.code == 128 + signal.SIGINT and not entered
  assert capsys.readouterr().err.strip().splitlines()[-1].startswith("tool.py: stopped by SIGINT; files are written")
  with preemption.StopRequest() as request:
    assert request.signum is None and int(request.flag.numpy()) == 0


def test_one_ctrl_c_while_a_loop_runs_requests_a_stop():
  """A Ctrl-C while a training loop's call runs: the watcher sees it at once and sets the flag, Python's handler
  runs when the call returns. That handler took the watcher's note for a first Ctrl-C and raised
  KeyboardInterrupt: the run ended without saving its step. It is one Ctrl-C, a request to stop; a second one
  stops at once."""
  with preemption.StopRequest() as request:
    @tf.function
    def loop():  # runs until the flag is set, as the training loop stops once it is
      return tf.while_loop(lambda i: tf.logical_and(request.flag.read_value() == 0, i < 10**8), lambda i: i + 1,
                           [tf.constant(0)])
    threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
    try:
      loop()
    except KeyboardInterrupt:
      pytest.fail("one Ctrl-C raised KeyboardInterrupt")
    assert request.signum == signal.SIGINT and int(request.flag.numpy()) == 1
    with pytest.raises(KeyboardInterrupt):  # a second one stops at once
      os.kill(os.getpid(), signal.SIGINT)
      time.sleep(5)


_SPIN = """
import tensorflow as tf
from xlnet_tf.training import preemption

@tf.function
def spin(n):  # a call that does not read the flag: a long step, or XLA compiling the loop
  return tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0, tf.int64)])

with preemption.StopRequest():
  spin(tf.constant(1, tf.int64))
  print("spinning", flush=True)
  spin(tf.constant(10 ** 13, tf.int64))  # days
"""


@pytest.mark.slow  # the default suite's 15 minutes; by default: the one-Ctrl-C tests
def test_a_second_ctrl_c_inside_a_tensorflow_call_ends_the_process(tmp_path):
  """Python's handler cannot run while the main thread is inside a TensorFlow call; a second Ctrl-C there waited
  for the call to end (minutes for XLA compiling the loop on a GPU, here days). The watcher now ends the process
  after `FORCE_AFTER_S` with one line, exit 130."""
  script = tmp_path / "spin.py"
  script.write_text(_SPIN)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=dict(os.environ, PYTHONPATH=root))
  try:
    assert proc.stdout.readline() == "spinning\n"
    time.sleep(2)  # inside the call (a traced function: no Python left to run)
    for _ in range(2):
      proc.send_signal(signal.SIGINT)
      time.sleep(0.2)
    _, err = proc.communicate(timeout=30)
  finally:
    proc.kill()
  assert proc.returncode == 128 + signal.SIGINT, err[-2000:]
  assert err.strip().splitlines()[-1] == (
      "spin.py: stopped by a second SIGINT inside a TensorFlow call (a step, or XLA compiling the loop), without "
      "saving the step in progress; files are written whole or not at all. Run the same command again to resume "
      "from the latest checkpoint."), err[-2000:]


def test_a_stop_that_tensorflow_reports_as_unraisable_prints_no_traceback(capsys):
  """TensorFlow's `nest.flatten` asks `isinstance(x, Mapping)` from C; a Ctrl-C landing in that check's Python code
  (the first check of each type: as `tf.data.TFRecordDataset` first reads a file list) raised the stop there, and
  TensorFlow printed it as an unraisable SystemError's traceback and went on. The run still ends as the stop, now
  without the traceback (1 run in 6 of `test_ctrl_c_before_training_ends_with_one_line` here)."""
  absl_flags.FLAGS.mark_as_parsed()
  armed = []

  class Trap(collections.abc.Mapping):  # Mapping's check of a new type asks each subclass's hook, this one too
    @classmethod
    def __subclasshook__(cls, other):
      if armed:
        armed.clear()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)  # cli_main's handler raises the stop in here, inside TensorFlow's C call
      return NotImplemented
    __getitem__ = __len__ = __iter__ = None

  class Fresh:
    pass

  def body(_):
    armed.append(True)
    tf.nest.flatten([Fresh()])

  reported, pytests_hook = [], sys.unraisablehook  # a script's hook prints the traceback; pytest's warns
  sys.unraisablehook = reported.append
  try:
    with pytest.raises(SystemExit) as ended:
      cli.cli_main("tool.py", body)(["tool.py"])
  finally:
    sys.unraisablehook = pytests_hook
    del Trap
    gc.collect()
  err = capsys.readouterr().err
  assert ended.value.code == 128 + signal.SIGINT and not reported, [r.exc_value for r in reported]
  assert err.strip().splitlines()[-1].startswith("tool.py: stopped by SIGINT"), err


def test_a_signal_while_the_loop_is_traced_adds_nothing_to_its_graph():
  """A SIGTERM that arrives while TensorFlow traces the training loop (its first call) runs the handler inside
  the graph being built: an op created there joins that graph (and under its lock the run hung, waiting on it).
  The request is still seen, and the loop's graph has no op of the handler's."""
  with preemption.StopRequest() as request:
    @tf.function
    def loop(x):
      signal.raise_signal(signal.SIGTERM)  # its handler runs here, as the trace goes on
      return x + 1
    graph = loop.get_concrete_function(tf.constant(1)).graph
    deadline = time.time() + 10
    while int(request.flag.numpy()) == 0 and time.time() < deadline:
      time.sleep(0.01)
    assert request.signum == signal.SIGTERM and int(request.flag.numpy()) == 1
  assert [op.type for op in graph.get_operations()] == ["Placeholder", "Const", "AddV2", "Identity"]


def test_an_evaluation_whose_results_could_not_be_written_is_an_error(monkeypatch, capsys):
  """--do_eval with standard output on a full disk (`> /dev/full`): exit 0, nothing on stderr, the results lost
  (rerun of sweep 25, N3). A training run stops on it (above); one that runs to its end says so, exit 1."""
  absl_flags.FLAGS.mark_as_parsed()
  monkeypatch.setattr(sys, "stdout", open("/dev/full", "w"))  # pylint: disable=consider-using-with
  try:
    with pytest.raises(SystemExit) as ended:
      cli.cli_main("tool.py", lambda options: cli.print_line("Eval result | eval_accuracy 0.9"))(["tool.py"])
  finally:
    preemption._reasons.clear()  # pylint: disable=protected-access  # the process's other tests
    preemption._pending.clear()  # pylint: disable=protected-access
  assert ended.value.code == 1
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      "tool.py: error: its standard output could not be written (No space left on device), so the lines after that, "
      "its results among them, were lost; the files it wrote are whole. Rerun with standard output where it can be "
      "written.")


def test_a_line_to_a_gone_reader_goes_nowhere_and_requests_a_stop(monkeypatch):
  """`cli.print_line` where standard output's reader is gone (sweep 21, P1): no BrokenPipeError; during a training
  loop a stop as on SIGPIPE; before one, the next loop stops before its first step (once)."""
  def gone_reader():
    read_fd, write_fd = os.pipe()
    os.close(read_fd)
    monkeypatch.setattr(sys, "stdout", open(write_fd, "w"))  # pylint: disable=consider-using-with
  gone_reader()
  with preemption.StopRequest() as request:
    cli.print_line("[1] | loss 0.5")
    cli.print_line("a second line")  # goes nowhere
    assert request.signum == signal.SIGPIPE and int(request.flag.numpy()) == 1
  gone_reader()
  cli.print_line("Training from step 0")
  with preemption.StopRequest() as request:
    assert request.signum == signal.SIGPIPE and int(request.flag.numpy()) == 1
  with preemption.StopRequest() as request:
    assert request.signum is None and int(request.flag.numpy()) == 0
  monkeypatch.setattr(sys, "stdout", open("/dev/full", "w"))  # pylint: disable=consider-using-with
  assert preemption.stop_name(signal.SIGPIPE) == "SIGPIPE (its standard output cannot be written)"
  with preemption.StopRequest() as request:  # a full disk (or EIO: a hung-up terminal) lost the run too (sweep 22)
    cli.print_line("[1] | loss 0.5")
    assert request.signum == signal.SIGPIPE and int(request.flag.numpy()) == 1
  # and the line said it had been a closed pipe, exit 141, advising the same command into the same disk (sweep 23, C3)
  stop = preemption.stopped(signal.SIGPIPE, 3, "m/ckpt-3")
  assert (str(stop), stop.exit_code) == (
      "stopped at step 3: its standard output cannot be written (No space left on device); checkpoint m/ckpt-3. "
      "Once it can be written (e.g. space freed on its disk), run the same command again to resume from step 3.", 1)
  preemption._reasons.clear()  # pylint: disable=protected-access  # the process's other tests


@pytest.mark.usefixtures("stop_signals_default")
def test_sighup_stops_a_run_unless_ignored_as_under_nohup():
  """SIGHUP (the terminal or ssh session closed) killed a training run at once, no line, its steps since the last
  checkpoint lost (sweep 21, P2): a stop request as SIGTERM is; a run under `nohup` (SIGHUP ignored) goes on."""
  with preemption.StopRequest() as request:
    signal.raise_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while int(request.flag.numpy()) == 0 and time.time() < deadline:
      time.sleep(0.01)
    assert request.signum == signal.SIGHUP
  old = signal.signal(signal.SIGHUP, signal.SIG_IGN)
  try:
    with preemption.StopRequest() as request:
      assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
      signal.raise_signal(signal.SIGHUP)
      time.sleep(0.1)
      assert request.signum is None and int(request.flag.numpy()) == 0
  finally:
    signal.signal(signal.SIGHUP, old)


def test_a_stop_lost_in_eval_stops_it_before_the_next_batch(capsys):
  absl_flags.FLAGS.mark_as_parsed()
  steps = []
  def step(features):
    steps.append(int(features["x"][0]))
    if len(steps) == 2:
      _lose_a_sigint()
    return {"y": features["x"]}
  def body(_):
    inference.run_batches(step, tf.data.Dataset.range(5).batch(1).map(lambda x: {"x": x}))
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", body)(["tool.py"])
  assert ended.value.code == 128 + signal.SIGINT and steps == [0, 1]
  assert capsys.readouterr().err.strip().splitlines()[-1].startswith("tool.py: stopped by SIGINT; files are written")


@pytest.mark.usefixtures("stop_signals_default")
def test_a_stop_lost_with_no_step_after_it_ends_the_run_with_its_code(capsys):
  """The run went on to its end (its files are whole), but a scheduler's SIGTERM or a Ctrl-C still ends it with
  128 + signal, not 0."""
  absl_flags.FLAGS.mark_as_parsed()
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", lambda options: _lose_a_sigint())(["tool.py"])
  assert ended.value.code == 128 + signal.SIGINT
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      "tool.py: stopped by SIGINT late: the code it landed in lost it, and the run went on to its end; what the run "
      "wrote is whole.")
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


_AFTER_MAIN = """
import os, signal, sys
import cli
import path_flags
cli.start_script(sys.argv)
from absl import flags as absl_flags
absl_flags.FLAGS.mark_as_parsed()
cli.cli_main("tool.py", lambda options: None)(["tool.py"])
os.kill(os.getpid(), signal.SIGTERM)  # as the process ends, after main
"""


def test_a_signal_after_main_does_not_say_the_run_was_starting():
  proc = subprocess.run([sys.executable, "-c", _AFTER_MAIN], capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=os.getcwd()))
  assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-2000:]
  assert proc.stderr.strip().splitlines()[-1].endswith("stopped by SIGTERM after its run ended; what the run wrote "
                                                       "is whole."), proc.stderr[-2000:]


_SLOW_TEARDOWN = """
import sys, time
import cli
import path_flags
cli.start_script(sys.argv)

class Slow:
  def __del__(self):
    time.sleep(3)  # as TensorFlow's teardown, after Python set the signals' default actions back

sys.modules["slow_teardown"] = type(sys)("slow_teardown")
sys.modules["slow_teardown"].held = Slow()
def body(options):
  print("run ended", flush=True)
cli.run_script(lambda: None, cli.cli_main("tool.py", body))
"""


def test_a_signal_as_the_process_ends_does_not_kill_it_without_its_line():
  """Python's shutdown tore the modules down with SIGTERM's default action back in place: a signal in that half
  second killed the run (exit -15, no line). A CLI's process now ends at once after its atexit functions."""
  proc = subprocess.Popen([sys.executable, "-c", _SLOW_TEARDOWN], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
  assert proc.stdout.readline() == "run ended\n"
  time.sleep(0.5)
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=60)
  ended_first = proc.returncode == 0  # what it does unless the machine is slow enough to still run its atexit then
  assert ended_first or (proc.returncode == 128 + signal.SIGTERM and err.strip().splitlines()[-1].endswith(
      "stopped by SIGTERM after its run ended; what the run wrote is whole.")), (proc.returncode, err[-2000:])



def test_the_choices_of_enum_flags_are_the_librarys():
  """flags.py stays free of TensorFlow, so its enum flags list their choices again: they must be the library's."""
  import flags  # pylint: disable=import-outside-toplevel
  from xlnet_tf import config as model_config  # pylint: disable=import-outside-toplevel
  from xlnet_tf.modeling import heads  # pylint: disable=import-outside-toplevel
  from xlnet_tf.tasks.pretrain import writer_options  # pylint: disable=import-outside-toplevel
  from xlnet_tf.training import config as train_config  # pylint: disable=import-outside-toplevel
  from xlnet_tf.training import optimization, runtime, schedule  # pylint: disable=import-outside-toplevel
  library = {"strategy": runtime.STRATEGIES, "mems_reset": ("auto",) + train_config.MEMS_RESET,
             "loss_weighting": train_config.LOSS_WEIGHTINGS, "decay_method": schedule.DECAY_METHODS,
             "clip_mode": ("auto",) + optimization.CLIP_MODES, "init": model_config.INITS,
             "summary_type": heads.SUMMARY_TYPES, "span_sampling": writer_options.SPAN_SAMPLING_CHOICES,
             "split": writer_options.SPLIT_CHOICES}
  seen = set()
  for name in dir(flags):
    if name.startswith("define_"):
      fv = absl_flags.FlagValues()
      getattr(flags, name)(**({"dropout": 0.1, "dropatt": 0.1} if name == "define_run_config_flags" else {}),
                           **({"learning_rate": 1e-5, "train_steps": 1, "min_lr_ratio": 0.0}
                              if name == "define_optimizer_flags" else {}), flag_values=fv)
      for flag_name in set(library) & set(fv):
        if not isinstance(fv[flag_name].parser, absl_flags.EnumParser):
          continue  # e.g. pretraining's --summary_type, a string it does not use (as in the original)
        assert tuple(fv[flag_name].parser.enum_values) == tuple(library[flag_name]), (name, flag_name)
        seen.add(flag_name)
  assert seen == set(library)


@pytest.mark.parametrize("arg,line", [("--learning_rate=nan", "--learning_rate must be a finite number. Received: nan."),
                                      ("--clip=inf", "--clip must be a finite number. Received: inf."),
                                      ("--dropout=-inf", "--dropout must be a finite number. Received: -inf.")])
def test_a_float_flag_that_is_not_finite_is_refused(arg, line):
  """absl parses nan and inf as floats: `--learning_rate=nan` trained to the first non-finite loss and wrote a
  run_flags.json that no json reader takes. `values()` refuses them for every float flag."""
  import run_pretrain  # pylint: disable=import-outside-toplevel
  flag_values = absl_flags.FlagValues()
  run_pretrain.define_flags(flag_values=flag_values)
  flag_values(["run_pretrain.py", arg])
  with pytest.raises(cli.FlagError) as error:
    cli.values(flag_values)
  assert str(error.value) == line


def test_checkpoints_of_another_model_or_pooling_are_refused_before_they_are_read(tmp_path):
  """Another ff_activation, or another --summary_type / --use_summ_proj / --uncased than the checkpoints were
  fine-tuned with, loads without a shape mismatch: an evaluation, prediction, export or resume went on with other
  numbers, exit 0."""
  import run_classifier  # pylint: disable=import-outside-toplevel
  from xlnet_tf import XLNetConfig  # pylint: disable=import-outside-toplevel
  config = XLNetConfig(json_path="tests/testdata/model/ckpt_untied/xlnet_config.json")
  config.to_json(str(tmp_path / "xlnet_config.json"))
  (tmp_path / "run_flags.json").write_text('{"summary_type": "mean", "use_summ_proj": true, "uncased": true}')
  o = cli.defaults(run_classifier.define_flags, summary_type="mean", uncased=True)
  run_files.check_trained_model(o, str(tmp_path), config)  # no checkpoint yet: nothing to check
  (tmp_path / "ckpt-4.index").write_bytes(b"")
  run_files.check_trained_model(o, str(tmp_path), config)
  relu = XLNetConfig(**dict(config.to_dict(), ff_activation="relu"))
  with pytest.raises(cli.FlagError, match=f"--predict_ckpt {tmp_path} holds checkpoints of another model "
                                          f"\\({tmp_path}/xlnet_config.json: ff_activation gelu there, relu here\\)"):
    run_files.check_trained_model(o, str(tmp_path), relu, "--predict_ckpt")
  kept = (tmp_path / "xlnet_config.json").read_text()
  (tmp_path / "xlnet_config.json").write_text(kept[:30])  # damaged: its advice named --model_config_path (sweep 27)
  with pytest.raises(cli.FlagError, match=f"^XLNet config file {tmp_path}/xlnet_config.json is not valid json: .*: it "
                                          f"describes the checkpoints in --model_dir {tmp_path}. Restore it from a "
                                          "copy of that run, or pass another --model_dir.$"):
    run_files.check_trained_model(o, str(tmp_path), config)
  (tmp_path / "xlnet_config.json").write_text(kept)
  o.summary_type, o.use_summ_proj = "last", False
  with pytest.raises(cli.FlagError) as error:
    run_files.check_trained_model(o, str(tmp_path), config)
  assert str(error.value) == (
      f"The checkpoints in --model_dir {tmp_path} were fine-tuned with other flags (--summary_type=mean there, "
      f"last here; --use_summ_proj=True there, False here; {tmp_path}/run_flags.json): the same weights would pool, "
      "read or place tokens otherwise, and score other numbers. Pass the values there, or another --model_dir.")
  o.summary_type, o.use_summ_proj, o.uncased = "mean", True, False  # cased text for a model trained on uncased
  with pytest.raises(cli.FlagError, match=r"fine-tuned with other flags \(--uncased=True there, False here; "):
    run_files.check_trained_model(o, str(tmp_path), config)
  (tmp_path / "run_flags.json").write_text('{"clamp_len": 3}')  # relative positions clamped at 3 in training
  with pytest.raises(cli.FlagError, match=r"fine-tuned with other flags \(--clamp_len=3 there, -1 here; "):
    run_files.check_trained_model(o, str(tmp_path), config)
  (tmp_path / "run_flags.json").write_text('{"clamp_len": 0}')  # 0 and -1 clamp nothing: the same model
  run_files.check_trained_model(o, str(tmp_path), config)


def test_a_huggingface_classifier_that_pools_otherwise_is_refused():
  """An HF classification model pools as its config.json says (summary_type, summary_use_proj): predicting with it
  under another --summary_type ran its head on another summary, exit 0."""
  import run_classifier  # pylint: disable=import-outside-toplevel
  hf = "tests/testdata/hf/cls_bin"  # summary_type mean, summary_use_proj true
  o = cli.defaults(run_classifier.define_flags, summary_type="mean")
  run_files.check_trained_model(o, hf, None, "--predict_ckpt")
  o.summary_type, o.use_summ_proj = "last", False
  with pytest.raises(cli.FlagError) as error:
    run_files.check_trained_model(o, hf, None, "--predict_ckpt")
  assert str(error.value) == (
      f"--predict_ckpt {hf} pools otherwise (summary_type mean there, --summary_type=last here; summary_use_proj True "
      f"there, --use_summ_proj=False here; {hf}/config.json): its head would read another summary and score other "
      "numbers. Pass --summary_type=mean --use_summ_proj=True.")
  run_files.check_trained_model(o, "tests/testdata/hf/qa_bin", None, "--predict_ckpt")  # no pooled head


def _pretrain_values(*args):
  import run_pretrain  # pylint: disable=import-outside-toplevel
  flag_values = absl_flags.FlagValues()
  run_pretrain.define_flags(flag_values=flag_values)
  flag_values(["run_pretrain.py", *args])
  return cli.values(flag_values)


class _NoNetworkGfile:
  """`tf.io.gfile` with no route to GCS: every call raises TensorFlow's error (fast, and the same on any machine)."""

  def exists(self, path):
    raise tf.errors.FailedPreconditionError(None, None, "Error executing an HTTP request: libcurl code 6 meaning "
                                            f"'Could not resolve hostname'\n\t when reading metadata of {path}")


def test_a_remote_path_flag_that_cannot_be_read_names_the_flag(monkeypatch):
  """No network, or a scheme TensorFlow has no file system for: every tool ended in a traceback from whichever
  check reached the path first. `values()` asks each remote path flag once, and names it."""
  from xlnet_tf import fileio  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(fileio, "_gfile", _NoNetworkGfile)
  with pytest.raises(cli.FlagError) as error:
    _pretrain_values("--record_info_dir=/data/r", "--model_dir=gs://b/m")
  assert str(error.value) == ("Cannot reach --model_dir gs://b/m: Error executing an HTTP request: libcurl code 6 "
                              "meaning 'Could not resolve hostname'. Check the network and credentials (gcloud auth "
                              "application-default login), or pass a local path.")
  monkeypatch.undo()
  with pytest.raises(cli.FlagError) as error:  # TensorFlow's own: no https:// file system in this build
    _pretrain_values("--init_checkpoint=https://h/xlnet-base-cased", "--model_dir=/tmp/m")
  assert str(error.value) == ("--init_checkpoint https://h/xlnet-base-cased: TensorFlow cannot read https:// paths "
                              "here; download the model and pass its local directory.")


@pytest.mark.parametrize("error, line", [
    (tf.errors.FailedPreconditionError(None, None, "Error executing an HTTP request: libcurl code 6\n\t when reading "
                                       "gs://b/r/corpus_info.json"),
     "tool.py: error: Cannot reach --record_info_dir gs://b/r/corpus_info.json: Error executing an HTTP request: "
     "libcurl code 6. Check the network and credentials (gcloud auth application-default login), or pass a local "
     "path."),
    (tf.errors.UnimplementedError(None, None, "File system scheme 's3' not implemented (file: 's3://b/m/x.index')"),
     "tool.py: error: s3://b/m/x.index: TensorFlow cannot read s3:// paths here; copy it to a local disk and pass "
     "its local path.")], ids=["unreachable", "unimplemented"])
def test_a_tensorflow_error_on_a_remote_path_is_one_line_naming_its_flag(error, line, monkeypatch, capsys):
  """Code that calls tf.io.gfile itself (a checkpoint's reader, a task's files) on a remote path that cannot be
  read: one line, the flag whose value holds the path named where one does."""
  monkeypatch.setattr(cli, "values", lambda: types.SimpleNamespace(record_info_dir="gs://b/r", model_dir="/tmp/m"))
  def body(_):
    raise error
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", body)(["tool.py"])
  assert ended.value.code == 1
  assert capsys.readouterr().err.strip().splitlines()[-1] == line


def test_a_tensorflow_error_naming_another_url_is_not_taken_for_a_path(monkeypatch):
  monkeypatch.setattr(cli, "values", lambda: types.SimpleNamespace(model_dir="/tmp/m"))
  def body(_):
    raise tf.errors.FailedPreconditionError(None, None, "Could not run op; see https://www.tensorflow.org/x")
  with pytest.raises(tf.errors.FailedPreconditionError):
    cli.cli_main("tool.py", body)(["tool.py"])


def test_a_path_flag_with_one_slash_after_its_scheme_is_refused():
  """`--model_dir=gs:/bucket/m` trained into a local directory named `gs:` (lost with a TPU VM), its last line
  naming `gs:/bucket/m` as if remote. A `./gs:/...` directory is still a local name."""
  with pytest.raises(cli.FlagError) as error:
    _pretrain_values("--record_info_dir=/data/a,s3:/b/r", "--model_dir=/tmp/m")
  assert str(error.value) == ("--record_info_dir s3:/b/r: 's3:/' has one slash, where a remote path has two "
                              "(s3://...). Pass s3://b/r, or ./s3:/b/r for a local path under a directory named 's3:'.")
  with pytest.raises(cli.FlagError, match=r"^--model_dir gs:/my-bucket/m: 'gs:/' has one slash"):
    _pretrain_values("--record_info_dir=/data/r", "--model_dir=gs:/my-bucket/m")
  assert _pretrain_values("--record_info_dir=/data/r", "--model_dir=./gs:/b/m").model_dir == "./gs:/b/m"
  assert _pretrain_values("--record_info_dir=/data/r", "--model_dir=C:/x/m").model_dir == "C:/x/m"  # a drive letter
  with pytest.raises(cli.FlagError, match=r"^--model_dir file:/tmp/m: .* Pass file:///tmp/m, or"):  # not file://tmp/m
    _pretrain_values("--record_info_dir=/data/r", "--model_dir=file:/tmp/m")
  with pytest.raises(cli.FlagError, match=r"^--model_dir=/dev/null is a pipe or a device, not a directory\. Pass a "
                                          r"directory\.$"):  # not the input's advice (zcat)
    _pretrain_values("--record_info_dir=/data/r", "--model_dir=/dev/null")


def test_a_directory_made_through_a_link_to_nowhere_is_named_by_its_flag(tmp_path, monkeypatch, capsys):
  """A directory that library code makes (`fileio.makedirs`: --xla_cache_dir's) through a dangling symbolic link:
  the line names the flag whose value it is (it said 'cannot be written (FileExistsError: [Errno 17] File exists')."""
  from xlnet_tf import fileio  # pylint: disable=import-outside-toplevel
  (tmp_path / "cache").symlink_to(tmp_path / "disk")
  monkeypatch.setattr(cli, "values", lambda: types.SimpleNamespace(xla_cache_dir=str(tmp_path / "cache")))
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", lambda o: fileio.makedirs(o.xla_cache_dir))(["tool.py"])
  assert ended.value.code == 1
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      f"tool.py: error: Cannot use --xla_cache_dir {tmp_path}/cache: it is a symbolic link to {tmp_path}/disk, which "
      f"does not exist (an unmounted disk?). Create {tmp_path}/disk or pass another --xla_cache_dir.")


def test_the_flag_of_a_path_is_the_one_whose_value_holds_it():
  """Not a flag whose value has an empty part or a file in the working directory (both 'hold' every path there)."""
  here = os.path.abspath("cache")
  options = types.SimpleNamespace(init_checkpoint="x.ckpt", record_info_dir="a,,b", xla_cache_dir="/elsewhere/c")
  assert path_flags.flag_of(options, here) is None  # pylint: disable=protected-access
  options.xla_cache_dir = "cache"
  assert path_flags.flag_of(options, os.path.join(here, "sub")) == "--xla_cache_dir"  # pylint: disable=protected-access


def test_a_model_dir_holding_a_model_to_start_from_is_refused(tmp_path):
  """--model_dir naming a model to start from (an HF download, a released or exported TF1 model) without it as
  --init_checkpoint: the run trained from random weights and wrote its checkpoints into that directory, exit 0
  (sweep 14, A5). A run's own directory (checkpoints `ckpt-N`, one of them lost) is not such a model."""
  import shutil  # pylint: disable=import-outside-toplevel
  hf, released, run = tmp_path / "hf", tmp_path / "released", tmp_path / "run"
  shutil.copytree("tests/testdata/hf/cls_bin", hf)
  for directory, names in ((released, ["xlnet_config.json", "xlnet_model.ckpt.index", "spiece.model"]),
                           (run, ["xlnet_config.json", "run_flags.json", "ckpt-2.index"])):
    directory.mkdir()
    for name in names:
      (directory / name).write_text("{}")
  (run / "checkpoint").write_text('model_checkpoint_path: "ckpt-4"\n')  # its ckpt-4 lost: not a model to start from
  for directory, held in ((hf, "config.json, pytorch_model.bin"),
                          (released, "xlnet_config.json, xlnet_model.ckpt.index")):
    for init_checkpoint in (None, "tests/testdata/hf/qa_bin"):
      with pytest.raises(cli.FlagError) as error:
        run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
            types.SimpleNamespace(model_dir=str(directory), init_checkpoint=init_checkpoint))
      assert str(error.value) == (f"--model_dir {directory} holds a model to start from ({held}); pass it as "
                                  "--init_checkpoint and another --model_dir.")
  run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
      types.SimpleNamespace(model_dir=str(run), init_checkpoint=None))
  run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
      types.SimpleNamespace(model_dir=str(tmp_path / "new"), init_checkpoint=None))
  (tmp_path / "link").symlink_to(released)  # its own --init_checkpoint's directory, by a link (sweep 32, U19)
  with pytest.raises(cli.FlagError, match=rf"^--model_dir {tmp_path}/link is the directory of --init_checkpoint "
                                          rf"{released}/xlnet_model.ckpt, which holds the model's xlnet_config.json"):
    run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
        types.SimpleNamespace(model_dir=str(tmp_path / "link"), init_checkpoint=str(released / "xlnet_model.ckpt")))


def test_a_model_dir_holding_another_checkpoint_is_refused(tmp_path):
  """--model_dir of an original (zihangdai) run: model.ckpt-N with or without its `checkpoint` state file, with or
  without its config.json: the run trained from random weights beside it, exit 0, or failed to resume it, advising
  to delete it (sweep 16, N1 and N2). A bare checkpoint there as --init_checkpoint is allowed while no state file
  names it (the run would resume from it)."""
  def refused(directory, init_checkpoint=None, **tool_flags):
    with pytest.raises(cli.FlagError) as error:
      run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
          types.SimpleNamespace(model_dir=str(directory), init_checkpoint=init_checkpoint,
                                **(tool_flags or dict(init_optimizer_state=False))))
    return str(error.value)

  def line(directory, name):
    return (f"--model_dir {directory} holds the checkpoint {directory}/{name}, not one of this tool's training runs "
            "(ckpt-N): pass it as --init_checkpoint (its Adam slots and step come with it: --init_optimizer_state) "
            "and another --model_dir.")

  for state in (True, False):
    for config in ([], ["config.json"], ["xlnet_config.json"]):
      directory = tmp_path / f"orig_{state}_{len(config) and config[0]}"
      directory.mkdir()
      for name in ["model.ckpt-6.index", "model.ckpt-6.data-00000-of-00001", *config]:
        (directory / name).write_text("{}")
      if state:
        (directory / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-6"\n')
      expected = (f"--model_dir {directory} holds a model to start from (xlnet_config.json, model.ckpt-6.index); "
                  "pass it as --init_checkpoint and another --model_dir.") if config == ["xlnet_config.json"] else \
          line(directory, "model.ckpt-6")  # with xlnet_config.json: a released model's line (A5)
      assert refused(directory) == expected
      if expected == line(directory, "model.ckpt-6"):  # a fine-tuning tool starts from the weights alone, at step 0
        assert refused(directory, summary_type="last") == expected.replace(
            " (its Adam slots and step come with it: --init_optimizer_state)", "")
      assert refused(directory, "tests/testdata/hf/qa_bin") == expected
      if not config:  # a bare checkpoint as --init_checkpoint in its own directory: allowed as before, without state
        if state:
          assert refused(directory, str(directory / "model.ckpt-6")) == line(directory, "model.ckpt-6")
        else:
          run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
              types.SimpleNamespace(model_dir=str(directory), init_checkpoint=str(directory / "model.ckpt-6")))
  killed = tmp_path / "killed"  # a killed conversion's temporary is no checkpoint: not named, the released one is
  killed.mkdir()
  for name in ["xlnet_model.ckpt.tmp-7-h.index", "zz.ckpt.index", "zz.ckpt.data-00000-of-00001"]:
    (killed / name).write_text("{}")
  assert refused(killed) == line(killed, "zz.ckpt")
  (killed / "zz.ckpt.index").unlink()
  run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
      types.SimpleNamespace(model_dir=str(killed), init_checkpoint=None))
  ours = tmp_path / "ours"  # a run's own checkpoints beside another: resumed
  ours.mkdir()
  for name in ["model.ckpt-6.index", "ckpt-2.index", "ckpt-2.data-00000-of-00001"]:
    (ours / name).write_text("{}")
  (ours / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\n')
  run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
      types.SimpleNamespace(model_dir=str(ours), init_checkpoint=None))


def test_a_huggingface_hub_cache_as_model_dir_is_refused(tmp_path):
  """A hub cache directory (`models--xlnet--...`, where `from_pretrained` downloads, read through its `snapshots/` as
  --init_checkpoint) passed as --model_dir: the run trained from random weights into the cache, exit 0 (sweep 16,
  N11). With several snapshots and no refs/main too; a directory whose snapshots/ holds no model is not one."""
  import shutil  # pylint: disable=import-outside-toplevel
  cache = tmp_path / "models--xlnet--tiny"
  shutil.copytree("tests/testdata/hf/cls_bin", cache / "snapshots" / "abc123")
  (cache / "refs").mkdir()
  (cache / "refs" / "main").write_text("abc123")
  (cache / "blobs").mkdir()
  shutil.copytree("tests/testdata/hf/cls_bin", cache / "snapshots" / "def456")
  for refs in (True, False):
    if not refs:
      shutil.rmtree(cache / "refs")
    with pytest.raises(cli.FlagError) as error:
      run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
          types.SimpleNamespace(model_dir=str(cache), init_checkpoint=None))
    assert str(error.value) == (f"--model_dir {cache} holds a model to start from (snapshots/abc123/config.json, "
                                "snapshots/abc123/pytorch_model.bin); pass it as --init_checkpoint and another "
                                "--model_dir.")
  other = tmp_path / "other"
  (other / "snapshots" / "a").mkdir(parents=True)
  (other / "snapshots" / "a" / "notes.txt").write_text("x")
  run_files.check_apart_from_init_checkpoint(  # pylint: disable=protected-access
      types.SimpleNamespace(model_dir=str(other), init_checkpoint=None))


def _spiece_refusal(o):
  """The line a fine-tuning run of the options `o` (from --init_checkpoint, into --model_dir) is refused with."""
  with pytest.raises(cli.FlagError) as error:
    run_files.check_trained_model(o, o.model_dir, None)
  return str(error.value)


def test_fine_tuning_a_run_of_another_sentencepiece_model_is_refused(tmp_path):
  """--init_checkpoint of a pretraining run whose records were written with another SentencePiece model than
  --spiece_model_file (its run_flags.json's spiece_model_sha256): it fine-tuned, exit 0, every id another piece than
  the embeddings learned (sweep 16, N5). Refused before records are written, as a resume on another model is; the
  same model, a run that recorded none, or a --model_dir to resume (which reads no --init_checkpoint) pass."""
  import hashlib  # pylint: disable=import-outside-toplevel
  import json  # pylint: disable=import-outside-toplevel
  spm = "tests/testdata/data/spm/spiece.model"
  other = tmp_path / "other.model"
  other.write_bytes(open(spm, "rb").read() + b"x")
  pt = tmp_path / "pt"
  pt.mkdir()
  for name in ["ckpt-2.index", "ckpt-2.data-00000-of-00001", "xlnet_config.json"]:
    (pt / name).write_text("{}")
  flags = {"record_info_dir": "/data/r", "spiece_model_sha256": hashlib.sha256(other.read_bytes()).hexdigest()}
  (pt / "run_flags.json").write_text(json.dumps(flags))
  o = types.SimpleNamespace(model_dir=str(tmp_path / "cls"), init_checkpoint=str(pt), do_train=True,
                            spiece_model_file=spm)
  assert _spiece_refusal(o) == (
      f"The checkpoints in --init_checkpoint {pt} were trained with other flags (--record_info_dir=/data/r there, "
      f"--spiece_model_file={spm} here: another SentencePiece model (its sha256 differs); {pt}/run_flags.json): the "
      "same ids would mean other pieces, and every embedding learned so far another piece. Pass that run's "
      "SentencePiece model as --spiece_model_file (a pretraining run's: the --sp_path its records were written "
      "with), or another --init_checkpoint.")
  run_files.check_trained_model(types.SimpleNamespace(**dict(vars(o), spiece_model_file=str(other))), o.model_dir,
                                None)
  resumed = tmp_path / "resumed"  # a run of ours to resume: --init_checkpoint is not read
  resumed.mkdir()
  for name in ["ckpt-4.index", "ckpt-4.data-00000-of-00001"]:
    (resumed / name).write_text("{}")
  run_files.check_trained_model(types.SimpleNamespace(**dict(vars(o), model_dir=str(resumed))), str(tmp_path / "x"),
                                None)
  del flags["spiece_model_sha256"]
  (pt / "run_flags.json").write_text(json.dumps(flags))
  run_files.check_trained_model(o, o.model_dir, None)


def test_fine_tuning_a_model_beside_another_sentencepiece_model_is_refused(tmp_path, caplog):
  """An HF model directory (or its TF1 conversion, or a released model) holding its own spiece.model, fine-tuned with
  another --spiece_model_file of the same size: trained, exit 0, no line (sweep 17, H3). Refused naming the file
  beside it; the same model, or none beside it, pass; a pretraining run's records are compared the same way."""
  spm = "tests/testdata/data/spm/spiece.model"
  model = tmp_path / "hf"
  shutil.copytree("tests/testdata/hf/lm_safetensors", model)
  shutil.copy("tests/testdata/squad/spm/spiece.model", model / "spiece.model")
  o = types.SimpleNamespace(model_dir=str(tmp_path / "cls"), init_checkpoint=str(model), do_train=True,
                            spiece_model_file=spm)
  assert _spiece_refusal(o) == (
      f"--spiece_model_file {spm} is another SentencePiece model than the one beside --init_checkpoint "
      f"({model}/spiece.model: its sha256 differs): the same ids would mean other pieces than the model learned. Pass "
      f"--spiece_model_file={model}/spiece.model, or move that file away if the vocabulary is meant to change.")
  run_files.check_trained_model(types.SimpleNamespace(**dict(vars(o), spiece_model_file=str(model / "spiece.model"))),
                                o.model_dir, None)
  records = types.SimpleNamespace(model_dir=str(tmp_path / "pt"), init_checkpoint=str(model), record_info_dir="/r")
  with pytest.raises(cli.FlagError, match=r"^The records of --record_info_dir /r were written with another "
                                          r"SentencePiece model than the one beside --init_checkpoint \("):
    run_files.check_init_checkpoint(records, None, {"spiece_model_sha256": "0" * 64})  # pylint: disable=W0212
  # Predicting, evaluating or exporting with it checked nothing: the wrong tokenizer, exit 0 (sweep 23, A1); nor a
  # TF1 checkpoint beside its model's spiece.model (a conversion, a released model).
  predict = types.SimpleNamespace(do_train=False, spiece_model_file=spm)
  with pytest.raises(cli.FlagError, match=f"^--spiece_model_file {spm} is another SentencePiece model than the one "
                                          f"beside --predict_ckpt \\({model}/spiece.model: its sha256 differs\\)"):
    run_files.check_trained_model(predict, str(model), None, "--predict_ckpt")
  tf1 = tmp_path / "tf1"
  tf1.mkdir()
  for name in ["xlnet_model.ckpt.index", "xlnet_model.ckpt.data-00000-of-00001", "spiece.model"]:
    shutil.copy(model / "spiece.model", tf1 / name)
  with pytest.raises(cli.FlagError, match=f"than the one beside --init_checkpoint \\({tf1}/spiece.model"):
    run_files.check_trained_model(predict, str(tf1), None, "--init_checkpoint")
  (model / "spiece.model").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 760289\n")
  with caplog.at_level("WARNING"):
    run_files.check_trained_model(o, o.model_dir, None)  # a Git LFS pointer: no model to compare with (sweep 18, R4)
  assert f"{model}/spiece.model beside --init_checkpoint is no SentencePiece model (a Git LFS pointer, a copy cut " \
         "short?): --spiece_model_file is not checked against the model's own." in caplog.text  # (sweep 27)
  (model / "spiece.model").unlink()
  run_files.check_trained_model(o, o.model_dir, None)


def test_a_hub_model_id_is_told_to_be_downloaded_first(tmp_path, monkeypatch):
  """`--init_checkpoint=xlnet-base-cased` (transformers' habit) was "--model_config_path is required", or "Checkpoint
  xlnet-base-cased not found" (sweep 23, C12)."""
  monkeypatch.chdir(tmp_path)
  for model in ("xlnet-base-cased", "xlnet/xlnet-large-cased"):
    with pytest.raises(cli.FlagError, match=f"^--init_checkpoint={model} is no file or directory here. If it is a "
                                            "HuggingFace hub model id: these tools do not download; pass .* "
                                            f"--local-dir DIR\\), or its hub cache directory \\(.*models--"
                                            f"{model.replace('/', '--')}\\).$"):
      path_flags.hub_snapshot("init_checkpoint", model)
  os.makedirs("xlnet")  # a local directory of that name, or a checkpoint prefix: the tools' own lines
  for path in ("xlnet/xlnet-large-cased", "ckpt-4", "model/xlnet_model.ckpt"):
    assert path_flags.hub_snapshot("init_checkpoint", path) == path


def test_a_hub_cache_s_root_or_an_empty_snapshot_is_named_as_such(tmp_path):
  """The hub cache's root, or a model whose refs/main names a snapshot a download left empty, got advice for an
  original TF1 checkpoint ("Pass the checkpoint prefix") or "--model_config_path is required" (sweep 30, U7)."""
  model = tmp_path / "hub" / "models--x--tiny"
  for commit in ("aaaa1111", "bbbb2222"):
    (model / "snapshots" / commit).mkdir(parents=True)
  (model / "snapshots" / "aaaa1111" / "config.json").write_text("{}")
  (model / "refs").mkdir()
  (model / "refs" / "main").write_text("bbbb2222")
  (tmp_path / "hub" / "models--y--other").mkdir()
  with pytest.raises(cli.FlagError, match=rf"^--input={tmp_path}/hub is a HuggingFace hub cache of 2 model\(s\) "
                                          rf"\(models--x--tiny, models--y--other\): pass the one to read, e.g\. "
                                          rf"{model}\.$"):
    path_flags.hub_snapshot("input", str(tmp_path / "hub"))
  with pytest.raises(cli.FlagError, match=rf"^--input={model} is a HuggingFace hub cache directory whose refs/main "
                                          rf"names the snapshot {model}/snapshots/bbbb2222, which is empty \(a "
                                          r"download cut short\?\)\. Download the model again"):
    path_flags.hub_snapshot("input", str(model))
  (model / "refs" / "main").write_text("aaaa1111")
  assert path_flags.hub_snapshot("input", str(model)) == str(model / "snapshots" / "aaaa1111")


def test_a_model_file_linking_to_a_missing_blob_is_named(tmp_path):
  """A hub snapshot's config.json linking to a blob a download never wrote: "holds HuggingFace weights
  (pytorch_model.bin) but no config.json. Put the model's config.json ... into" the snapshot, or "--model_config_path
  is required" (in the hub cache or its snapshot given). Other broken links are not the tools' business."""
  model = tmp_path / "models--x--tiny"
  snapshot = model / "snapshots" / "aaaa1111"
  snapshot.mkdir(parents=True)
  (model / "blobs").mkdir()
  (model / "blobs" / "w1").write_bytes(b"weights")
  (snapshot / "pytorch_model.bin").symlink_to("../../blobs/w1")
  (snapshot / "notes").symlink_to("../../blobs/gone")
  assert path_flags.hub_snapshot("init_checkpoint", str(model)) == str(snapshot)
  (snapshot / "config.json").symlink_to("../../blobs/c1")
  for given in (model, snapshot):
    with pytest.raises(cli.FlagError, match=rf"^--init_checkpoint={given}: {snapshot}/config.json is a link to "
                                            r"\.\./\.\./blobs/c1, which does not exist: a download cut short\? "
                                            r"Download the model again, or pass a directory that holds it\.$"):
      path_flags.hub_snapshot("init_checkpoint", str(given))


def test_a_line_stdout_s_encoding_cannot_hold_is_shown_escaped():
  """A path beyond PYTHONIOENCODING=ascii in a CLI's line was `'ascii' codec can't encode character`, exit 1, after
  the run had written its files (sweep 23, C11)."""
  code = "import cli; cli.start_script(['x']); cli.print_line('Wrote /tmp/\\u00fcn/x')"
  proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, PYTHONIOENCODING="ascii"))
  assert (proc.returncode, proc.stdout) == (0, "Wrote /tmp/\\xfcn/x\n"), proc.stderr[-2000:]


def test_an_init_checkpoint_that_is_no_checkpoint_is_refused_before_the_records(tmp_path):
  """`--init_checkpoint=D/ckpt-2.index` was refused by the trainer, after the training records were written (sweep
  23, C6)."""
  (tmp_path / "ckpt-2.index").write_text("{}")
  o = types.SimpleNamespace(model_dir=str(tmp_path / "m"), init_checkpoint=str(tmp_path / "ckpt-2.index"),
                            do_train=True)
  with pytest.raises(cli.FlagError, match=f"^--init_checkpoint: {tmp_path}/ckpt-2.index is a file, not a checkpoint"):
    run_files.check_init_checkpoint(o, None)  # pylint: disable=protected-access


def test_run_pretrain_s_casing_refusal_names_the_records_to_write(tmp_path):
  """In run_pretrain --uncased picks the record files: `Pass --uncased=False` led to the refusal of the records
  (sweep 24, N-C6)."""
  import json  # pylint: disable=import-outside-toplevel
  (tmp_path / "run_flags.json").write_text(json.dumps({"uncased": False}))
  o = types.SimpleNamespace(uncased=True, record_info_dir="/r")
  with pytest.raises(cli.FlagError, match=r"Pass records written by data_utils.py with --uncased=False \(and "
                                          r"--uncased=False\), or another --init_checkpoint.$"):
    run_files._check_started_with(  # pylint: disable=protected-access
        o, str(tmp_path), "--init_checkpoint", run_files.run_flags(str(tmp_path)))


def test_a_run_flags_json_that_is_a_directory_is_one_line(tmp_path):
  """It was a bare `[Errno 21] Is a directory: '.../run_flags.json'` (sweep 23, C7)."""
  import json  # pylint: disable=import-outside-toplevel
  (tmp_path / "run_flags.json").mkdir()
  with pytest.raises(cli.FlagError, match=f"^{tmp_path}/run_flags.json is a directory, not the file of the flags of "
                                          "the run that wrote the checkpoints there, which this run checks. Restore"):
    run_files.run_flags(str(tmp_path))
  # A label_list edited into a string: it was said to differ from the same labels as a list (sweep 27, U9).
  (tmp_path / "run_flags.json").rmdir()
  (tmp_path / "run_flags.json").write_text(json.dumps({"label_list": "neg,pos"}))
  with pytest.raises(cli.FlagError, match=f"^{tmp_path}/run_flags.json is damaged \\(its label_list 'neg,pos' is not "
                                          "a list\\): it records the flags of the run"):
    run_files.run_flags(str(tmp_path))
  (tmp_path / "run_flags.json").write_text(json.dumps({"label_list": None}))  # a regression's
  assert run_files.run_flags(str(tmp_path)) == {"label_list": None}
  # A digest that is no sha256: "another SentencePiece model", "pass the values there" (this run's; sweep 28, A7).
  (tmp_path / "run_flags.json").write_text(json.dumps({"spiece_model_sha256": [1]}))
  with pytest.raises(cli.FlagError, match=f"^{tmp_path}/run_flags.json is damaged \\(its spiece_model_sha256 \\[1\\] "
                                          "is not a sha256\\): it records the flags of the run"):
    run_files.run_flags(str(tmp_path))
  (tmp_path / "run_flags.json").write_text(json.dumps({"spiece_model_sha256": "ab" * 32}))
  assert run_files.run_flags(str(tmp_path)) == {"spiece_model_sha256": "ab" * 32}
  # Damaged beside --init_checkpoint: the remedy names that flag, not --model_dir (sweep 27).
  (tmp_path / "run_flags.json").write_text("{")
  (tmp_path / "xlnet_model.ckpt.index").write_bytes(b"")
  o = types.SimpleNamespace(init_checkpoint=str(tmp_path / "xlnet_model.ckpt"), model_dir=str(tmp_path / "new"))
  with pytest.raises(cli.FlagError, match=r"^.*run_flags.json is damaged .*Restore it from a copy of that run, or "
                                          r"pass another --init_checkpoint\.$"):
    run_files.check_init_checkpoint(o, None)  # pylint: disable=protected-access


def test_fine_tuning_a_run_of_other_casing_or_clamp_len_is_refused(tmp_path):
  """--init_checkpoint of a run trained on uncased text (its run_flags.json's uncased: a pretraining run's records')
  fine-tuned with --uncased=False, or of one trained with --clamp_len=5 started with -1: trained, exit 0, though a
  resume, an evaluation or a prediction refuses it (sweep 23, B7). Refused before records are written; the same
  values (clamp_len's that clamp nothing are one), a run that recorded none (a released model) or a --model_dir to
  resume pass."""
  import json  # pylint: disable=import-outside-toplevel
  pt = tmp_path / "pt"
  pt.mkdir()
  for name in ["ckpt-2.index", "ckpt-2.data-00000-of-00001"]:
    (pt / name).write_text("{}")
  (pt / "run_flags.json").write_text(json.dumps({"record_info_dir": "/data/r", "uncased": True, "clamp_len": -1}))
  o = types.SimpleNamespace(model_dir=str(tmp_path / "cls"), init_checkpoint=str(pt), do_train=True, uncased=False,
                            clamp_len=0)
  with pytest.raises(cli.FlagError) as error:
    run_files.check_trained_model(o, o.model_dir, None)
  assert str(error.value) == (
      f"--init_checkpoint {pt} was trained with other flags (--uncased=True there, False here; {pt}/run_flags.json): "
      "its weights learned the pieces of lower-cased text, which this run would read otherwise. Pass --uncased=True, "
      "or another --init_checkpoint.")
  run_files.check_trained_model(types.SimpleNamespace(**dict(vars(o), uncased=True)), o.model_dir, None)
  (pt / "run_flags.json").write_text(json.dumps({"uncased": False, "clamp_len": 5}))
  with pytest.raises(cli.FlagError) as error:  # run_pretrain.py's path: restore_or_init checks it there
    run_files.check_init_checkpoint(o, None)  # pylint: disable=protected-access
  assert str(error.value) == (
      f"--init_checkpoint {pt} was trained with other flags (--clamp_len=5 there, 0 here; {pt}/run_flags.json): its "
      "weights learned relative positions clamped at 5, which this run would read otherwise. Pass --clamp_len=5, or "
      "another --init_checkpoint.")
  run_files.check_trained_model(types.SimpleNamespace(**dict(vars(o), clamp_len=5)), o.model_dir, None)
  resumed = tmp_path / "resumed"  # a run of ours to resume: --init_checkpoint is not read
  resumed.mkdir()
  for name in ["ckpt-4.index", "ckpt-4.data-00000-of-00001"]:
    (resumed / name).write_text("{}")
  run_files.check_init_checkpoint(  # pylint: disable=protected-access
      types.SimpleNamespace(**dict(vars(o), model_dir=str(resumed))), None)
  (pt / "run_flags.json").unlink()  # a released model, an original run: nothing recorded
  run_files.check_trained_model(o, o.model_dir, None)


def test_a_huggingface_model_of_other_casing_is_refused(tmp_path):
  """An HF directory whose tokenizer_config.json says do_lower_case true (what XLNetTokenizer.save_pretrained writes
  for a lower-casing tokenizer), fine-tuned or predicted with --uncased=False: its file was never read, exit 0 (sweep
  23, B7). Refused naming the file; the same casing, or no file or key, pass; a damaged file or a do_lower_case that
  is no boolean is named."""
  import json  # pylint: disable=import-outside-toplevel
  model = tmp_path / "hf"
  shutil.copytree("tests/testdata/hf/lm_safetensors", model)
  (model / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True, "remove_space": True}))
  o = types.SimpleNamespace(model_dir=str(tmp_path / "cls"), init_checkpoint=str(model), do_train=True, uncased=False)
  with pytest.raises(cli.FlagError) as error:
    run_files.check_trained_model(o, o.model_dir, None)
  assert str(error.value) == (
      f"--init_checkpoint {model} was trained with other flags (do_lower_case true there, --uncased=False here; "
      f"{model}/tokenizer_config.json): its weights learned the pieces of lower-cased text, which this run would "
      "read otherwise. Pass --uncased=True, or another --init_checkpoint.")
  predict = types.SimpleNamespace(do_train=False, uncased=False)
  with pytest.raises(cli.FlagError, match=f"^--predict_ckpt {model} was trained with other flags \(do_lower_case "
                                          "true there, --uncased=False here;"):
    run_files.check_trained_model(predict, str(model), None, "--predict_ckpt")
  run_files.check_trained_model(types.SimpleNamespace(do_train=False, uncased=True), str(model), None,
                                "--predict_ckpt")
  (model / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "XLNetTokenizer"}))
  run_files.check_trained_model(o, o.model_dir, None)
  (model / "tokenizer_config.json").unlink()
  run_files.check_trained_model(predict, str(model), None, "--predict_ckpt")
  for text, what in (('{"do_lower_case": "false"}', 'its do_lower_case is "false", not true or false'),  # HF: truthy
                     ('{"do_lower_case": tr', "it is damaged (not valid JSON (line 1 column 19: Expecting value))")):
    (model / "tokenizer_config.json").write_text(text)  # taken for no casing: unchecked, exit 0 (sweep 24, N-C2)
    with pytest.raises(ValueError) as error:
      run_files.check_trained_model(o, o.model_dir, None)
    assert str(error.value) == (f"{model}/tokenizer_config.json: {what}. It says whether the model's text was "
                                "lower-cased, which is checked against --uncased: fix it, or restore it from the "
                                "model's download.")


def test_another_tool_s_model_dir_is_refused_before_the_training_records_are_written(tmp_path):
  """run_classifier.py --do_train with a pretraining run's --model_dir wrote (or rewrote) the training records in
  --output_dir, then refused the resume (sweep 25, C4): the check that runs before the records says it now."""
  import json  # pylint: disable=import-outside-toplevel
  import run_classifier  # pylint: disable=import-outside-toplevel
  tf.train.CheckpointManager(tf.train.Checkpoint(v=tf.Variable(1.0)), str(tmp_path), 1, checkpoint_name="ckpt").save(2)
  (tmp_path / "run_flags.json").write_text(json.dumps({"record_info_dir": "r", "mem_len": 16, "perm_size": 16}))
  o = cli.defaults(run_classifier.define_flags, model_dir=str(tmp_path), do_train=True)
  with pytest.raises(cli.FlagError, match=f"^Cannot resume from {tmp_path}/ckpt-2: --model_dir {tmp_path} holds the "
                                          r"checkpoints of another tool \(its run_flags.json has flags this one lacks: "
                                          r"mem_len, perm_size, record_info_dir\)\. Pass another --model_dir\.$"):
    run_files.check_trained_model(o, o.model_dir, None)


def test_a_path_flag_whose_name_is_not_utf8_is_refused():
  """A directory named in Latin-1 (`é` = byte 0xE9, which Python reads as a surrogate): TensorFlow's file functions
  failed with `'utf-8' codec can't encode character '\\udce9' ... surrogates not allowed`, naming no flag, and
  data_utils.py only after tokenizing the whole corpus (sweep 19, F1). UTF-8 names are paths like any other."""
  with pytest.raises(cli.FlagError) as error:
    _pretrain_values("--record_info_dir=/data/r", "--model_dir=" + os.fsdecode(b"/tmp/lat\xe9/m"))
  assert str(error.value) == (
      "--model_dir=/tmp/lat\\xe9/m: the name is not UTF-8 (byte 0xe9), which TensorFlow's file functions cannot "
      "take. Rename it to UTF-8 (e.g. convmv -f latin1 -t utf8 --notest) or pass another path.")
  assert _pretrain_values("--record_info_dir=/data/r", "--model_dir=/tmp/ünï çødé/m").model_dir == "/tmp/ünï çødé/m"


def test_a_flagfile_that_is_a_stream_or_not_utf8_is_one_line(tmp_path, capsys):
  """--flagfile=<(...) or /dev/stdin: the start-up's read of the command line (for -v) took its flags, absl's parse
  got none, and the run trained with the defaults, exit 0 (sweep 19, F6). One not in UTF-8 was a traceback (F7).
  A regular UTF-8 flagfile passes; one missing, or a directory, is the line of the other file flags (it was absl's
  `ERROR:: Unable to open flagfile: [Errno 21] ...`; sweep 26, C4)."""
  fifo, latin1, good, bom = tmp_path / "fifo", tmp_path / "latin1.txt", tmp_path / "good.txt", tmp_path / "bom.txt"
  os.mkfifo(fifo)
  latin1.write_bytes(b"--train_steps=5\n# caf\xe9\n")
  bom.write_bytes(b"\xef\xbb\xbf--train_steps=5\n")  # Notepad's "UTF-8": the first flag read as a stray word
  nested = tmp_path / "nested.txt"
  nested.write_text(f"--flagfile={good}\n--flagfile={nested}\n--flagfile={fifo}\n")  # itself too: circular
  good.write_text("--train_steps=5\n# café\n", encoding="utf-8")
  # absl takes an indented --flagfile= for a flag it does not know; UTF-16 for flags of NUL bytes (sweep 30, U8).
  indented, utf16, nul = tmp_path / "indented.txt", tmp_path / "utf16.txt", tmp_path / "nul.txt"
  indented.write_text(f"--train_steps=5\n  --flagfile={good}\n")
  utf16.write_text("--train_steps=5\n", encoding="utf-16-le")
  nul.write_bytes(b"# absl skips a comment, NUL or not: \0\n--train_steps=5\n--model_dir=/a\0b\n")
  comment = tmp_path / "comment.txt"  # absl keeps it in the value: trained into "D  # my model" (sweep 32, U4)
  comment.write_text("# runs\n--train_steps=5\n--model_dir=/m/d  # my model\n")
  relative, empty = tmp_path / "relative.txt", tmp_path / "empty.txt"
  (tmp_path / "inner.txt").write_text("--train_steps=5\n")
  relative.write_text("--train_steps=4\n--flagfile=inner.txt\n")
  empty.write_text("--flagfile=\n")
  for argv, line in (
      ([f"--flagfile={fifo}"], f"--flagfile={fifo} is a pipe or a device, not a file: the tools read an input more "
                               "than once"),
      (["--flagfile", str(latin1)], f"--flagfile={latin1} is not UTF-8 (byte 0xe9 on line 2). Convert it to UTF-8"),
      ([f"--flagfile={bom}"], f"--flagfile={bom} starts with a byte-order mark"),
      # Named in a flagfile (sweep 20, N1): with the line naming it, the path as absl reads it (sweep 32, U18).
      ([f"--flagfile={nested}"], f"--flagfile={nested} line 3: --flagfile={fifo} is a pipe or a device"),
      ([f"--flagfile={relative}"], f"--flagfile={relative} line 2: --flagfile=inner.txt does not exist: absl reads a "
                                   "--flagfile named in one from the working directory, not beside the file that "
                                   f"names it. Write --flagfile={tmp_path}/inner.txt."),
      ([f"--flagfile={empty}"], f"--flagfile={empty} line 1: '--flagfile=' names no file. Name a file of flags, or "
                                "remove the line."),
      ([f"--flagfile={tmp_path}/missing"], f"--flagfile={tmp_path}/missing does not exist. Pass a file of flags, one "
                                           "--flag=value per line."),
      ([f"--flagfile={tmp_path}"], f"--flagfile={tmp_path} is a directory. Pass a file of flags"),
      ([f"--flagfile={indented}"], f"--flagfile={indented} line 2: absl reads an indented --flagfile= as an unknown "
                                   "flag, not as a file of flags. Remove the spaces before it."),
      ([f"--flagfile={utf16}"], f"--flagfile={utf16} holds NUL bytes: is it UTF-16? Convert it to UTF-8"),
      ([f"--flagfile={nul}"], f"--flagfile={nul} holds a NUL byte on line 3, which no flag's value can hold."),
      ([f"--flagfile={comment}"], f"--flagfile={comment} line 3: '--model_dir=/m/d  # my model': absl keeps the "
                                  "whole rest of the line as the value, this comment too. Put the comment on a line "
                                  "of its own")):
    with pytest.raises(SystemExit) as exit_:
      cli._check_flagfiles(["tool.py", *argv])  # pylint: disable=protected-access
    assert exit_.value.code == 1 and capsys.readouterr().err.startswith(f"tool.py: error: {line}")
  check = cli._check_flagfiles  # pylint: disable=protected-access
  check(["tool.py", f"--flagfile={good}", "--flagfile=/dev/null"])  # an empty stub


def test_a_flagfile_under_home_is_found_as_absl_finds_it(tmp_path, monkeypatch):
  """`--flagfile=~/flags.txt`: the shell leaves a ~ after = to the tool, absl expands it; it was refused as missing
  (sweep 30, U4), on the command line and in a flagfile."""
  monkeypatch.setenv("HOME", str(tmp_path))
  (tmp_path / "inner.txt").write_text("--train_steps=5\n")
  (tmp_path / "flags.txt").write_text("--flagfile=~/inner.txt\n")
  cli._check_flagfiles(["tool.py", "--flagfile=~/flags.txt"])  # pylint: disable=protected-access
  assert _pretrain_values("--flagfile=~/flags.txt").train_steps == 5


@pytest.mark.parametrize("make,words", [
    (lambda p: p.mkdir(), "{p}: Is a directory; a file is read or written there: move the directory away or pass "
                          "another path."),
    (lambda p: os.symlink(p, p), "{p}: Too many levels of symbolic links; fix that and rerun."),
])
def test_an_os_error_no_check_foresaw_names_its_path_in_words(make, words, tmp_path, capsys):
  """A directory named config.json in an HF model directory was `[Errno 21] Is a directory: 'D/config.json'` alone
  (sweep 30, U11); what no check of the tools foresees ends so."""
  path = tmp_path / "config.json"
  make(path)
  def body(options):
    del options
    with open(path, encoding="utf-8") as f:
      f.read()
  absl_flags.FLAGS.mark_as_parsed()
  with pytest.raises(SystemExit) as ended:
    cli.cli_main("tool.py", body)(["tool.py"])
  assert ended.value.code == 1
  assert capsys.readouterr().err.strip().splitlines()[-1] == "tool.py: error: " + words.format(p=path)
  two_paths = OSError(errno.ENOTEMPTY, os.strerror(errno.ENOTEMPTY), "a", None, "b")  # a rename's (sweep 31, U4)
  line = cli._bare_os_error(two_paths)  # pylint: disable=protected-access
  assert line == "a -> b: Directory not empty; fix that and rerun."


@pytest.mark.parametrize("error,words", [
    ("ImportError('libtensorflow_cc.so.2: failed to map segment from shared object')",
     "(libtensorflow_cc.so.2: failed to map segment from shared object); the memory this process may map (ulimit -v, "
     "a scheduler's memory limit) is too small for TensorFlow (about 3 GB): raise it, and rerun."),
    ("ImportError('No module named sentencepiece')",
     "(No module named sentencepiece); the installation is incomplete: run bash scripts/setup.sh, and rerun."),
])
def test_modules_that_cannot_be_loaded_are_one_line(error, words, tmp_path):
  """Under a memory cap (`ulimit -v 1000000`) TensorFlow could not be loaded: a 13-line traceback from the script's
  imports, outside its main (sweep 30, U12)."""
  script = tmp_path / "tool.py"
  script.write_text(f"import sys\nsys.path.insert(0, {os.getcwd()!r})\nimport cli\ncli.start_script()\n"
                    f"raise {error}\n")
  proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
  assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
  assert proc.stderr.strip().splitlines()[-1] == "tool.py: error: Could not load the tool's modules " + words


def test_an_import_error_inside_a_tool_s_main_keeps_its_traceback(tmp_path):
  """Once the tool runs, an ImportError is a bug, not a package that cannot load: it was made that line, with
  advice to reinstall (sweep 31, U1)."""
  script = tmp_path / "tool.py"
  script.write_text(f"import sys\nsys.path.insert(0, {os.getcwd()!r})\nimport cli\ncli.start_script()\n"
                    "def body(options):\n  from xlnet_tf.training.schedule import remap_lr\n"
                    "cli.run_script(lambda: None, cli.cli_main('tool.py', body))\n")
  proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
  assert proc.returncode == 1 and "Traceback" in proc.stderr and "Could not load" not in proc.stderr, proc.stderr
  assert proc.stderr.strip().splitlines()[-1].startswith("ImportError: cannot import name 'remap_lr'"), proc.stderr


def test_a_stray_word_on_the_command_line_is_one_line():
  """`--do_eval True` (a bool flag takes no separate value) printed the tool's whole help, 84-274 lines, ending
  `Unexpected arguments: True`, with no `{tool}: error:` line (sweep 19, F10)."""
  proc = subprocess.run([sys.executable, "data_utils.py", "--uncased", "True"], capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1] == (
      "data_utils.py: error: Unexpected argument 'True': flags take their value after '=' (--uncased=True), and a "
      "bool flag alone means True. Pass --helpshort to see the flags.")
  assert "--bsz_per_host" not in proc.stderr + proc.stdout  # no help


def test_absl_s_parse_errors_are_our_one_line():
  """`--nobi_data=1` was absl's ValueError traceback; a misspelt flag's `Did you mean: do_train ?.` and a bool flag's
  `('Non-boolean argument to boolean flag', 'maybe')` are said in words (sweep 32, U21)."""
  proc = subprocess.run([sys.executable, "data_utils.py", "--nobi_data=1"], capture_output=True, text=True,
                        timeout=120)
  assert proc.returncode == 1 and "Traceback" not in proc.stderr
  assert proc.stderr.strip().splitlines()[-1] == (
      "data_utils.py: error: --nobi_data=1: --nobi_data takes no value; pass --nobi_data alone (--bi_data=false) or "
      "--bi_data=1. Pass --helpshort or --helpfull to see the flags.")
  line = cli._absl_line  # pylint: disable=protected-access
  assert line("Unknown command line flag 'dropot'. Did you mean: dropatt, dropout ?") == (
      "Unknown command line flag 'dropot'. Did you mean --dropatt, --dropout?")
  assert line("flag --do_train=maybe: ('Non-boolean argument to boolean flag', 'maybe')") == (
      "flag --do_train=maybe: maybe is not true or false (a bool flag takes true, false, 1 or 0; alone it means true)")
  assert line("flag --dropout=x: could not convert string to float: 'x'") == (
      "flag --dropout=x: could not convert string to float: 'x'")


def test_a_path_in_shell_quotes_from_a_flagfile_is_refused(tmp_path):
  """A --flagfile line `--model_dir="/abs/path"` (a shell's quoting, which absl keeps): the run wrote into a
  directory named `"` under the working directory, exit 0 (sweep 26, B2)."""
  flagfile = tmp_path / "flags.txt"
  flagfile.write_text(f'--record_info_dir=/data/r\n--model_dir="{tmp_path}/m"\n')
  with pytest.raises(cli.FlagError) as error:
    _pretrain_values(f"--flagfile={flagfile}")
  assert str(error.value) == (f'--model_dir="{tmp_path}/m": its quotes would be part of the path (no shell takes them '
                              f"away in a --flagfile line). Write --model_dir={tmp_path}/m.")
  flagfile.write_text(f"--record_info_dir=/data/r\n--model_dir='{tmp_path}/m'\n")
  with pytest.raises(cli.FlagError, match="its quotes would be part of the path"):
    _pretrain_values(f"--flagfile={flagfile}")
  assert _pretrain_values(f"--model_dir={tmp_path}/m", "--record_info_dir=/data/r").model_dir == f"{tmp_path}/m"
  # An opening quote alone, and train_spm's --model_prefix (no path flag by its name: its quotes and `~` were kept,
  # the model written under ./'"' or ./~; rerun 26, N2, N8).
  with pytest.raises(cli.FlagError, match=f'^--model_dir="{tmp_path}/m: its quotes .* Write --model_dir={tmp_path}/m'):
    path_flags.check_path("model_dir", f'"{tmp_path}/m')
  with pytest.raises(cli.FlagError, match="^--model_prefix='m': its quotes would be part of the path"):
    path_flags.check_path("model_prefix", "'m'")
  assert path_flags.expand_user("model_prefix", "~/spm/m") == os.path.expanduser("~/spm/m")


def test_an_input_flag_through_a_symbolic_link_that_loops_says_so(tmp_path, capsys):
  """--data_dir said "is not a directory", --init_checkpoint "Checkpoint ... not found (....index does not exist)",
  --flagfile absl's "ERROR:: Unable to open flagfile: [Errno 40] Too many levels of symbolic links" (sweep 25, C5):
  the line the output flags give."""
  (tmp_path / "a").symlink_to(tmp_path / "b")
  (tmp_path / "b").symlink_to(tmp_path / "a")
  loop = f"{tmp_path}/a -> {tmp_path}/b"
  with pytest.raises(cli.FlagError) as error:
    _pretrain_values("--record_info_dir=/data/r", "--model_dir=/tmp/m", f"--init_checkpoint={tmp_path}/a")
  assert str(error.value) == (f"Cannot use --init_checkpoint {tmp_path}/a: it is a symbolic link that loops ({loop}). "
                              "Point it at a file or directory or pass another --init_checkpoint.")
  with pytest.raises(cli.FlagError) as error:
    _pretrain_values(f"--record_info_dir={tmp_path}/a/r", "--model_dir=/tmp/m")
  assert str(error.value) == (f"Cannot use --record_info_dir {tmp_path}/a/r: {tmp_path}/a is a symbolic link that "
                              f"loops ({loop}). Point it at a directory or pass another --record_info_dir.")
  with pytest.raises(SystemExit):
    cli._check_flagfiles(["tool.py", f"--flagfile={tmp_path}/a"])  # pylint: disable=protected-access
  assert capsys.readouterr().err == (f"tool.py: error: Cannot use --flagfile {tmp_path}/a: it is a symbolic link that "
                                     f"loops ({loop}). Point it at a file or pass another --flagfile.\n")


@pytest.mark.parametrize("closed", [1, 2])
def test_a_tool_started_with_stdout_or_stderr_closed_runs_and_says_it_by_its_code(closed, tmp_path):
  """`tool >&-` (a daemon's or cron's set-up): a finished run ended in a traceback, exit 1 (its flush of a stdout
  Python had set to None); with `2>&-` a run failed at once, without a word (sweep 21, P4). Both run (the closed
  descriptor is /dev/null: no file opened later takes its number), exit 0."""
  proc = subprocess.run([sys.executable, "convert_checkpoint.py", "--input=tests/testdata/hf/cls_bin",
                         f"--output_dir={tmp_path}/out"], preexec_fn=lambda: os.close(closed), capture_output=False,
                        timeout=120, stdin=subprocess.DEVNULL)
  assert proc.returncode == 0
  assert (tmp_path / "out" / "xlnet_config.json").exists()
