# Steps that run the same tool on different inputs (greet, farewell and inner's make_it run
# make.cwl; after and inner's count_it run count.cwl), and a ShellCommandRequirement step.
cwlVersion: v1.2
class: Workflow
requirements:
  SubworkflowFeatureRequirement: {}
inputs:
  w1: string
  w2: string
  w3: string
outputs:
  counted: {type: File, outputSource: after/out}
  inner_counted: {type: File, outputSource: inner/final}
  piped: {type: File, outputSource: piped/out}
steps:
  greet:
    run: make.cwl
    in: {word: w1}
    out: [out]
  farewell:
    run: make.cwl
    in: {word: w2}
    out: [out]
  after:
    run: count.cwl
    in: {inp: greet/out}
    out: [out]
  inner:
    run: inner.cwl
    in: {word: w3}
    out: [final]
  piped:
    run:
      class: CommandLineTool
      requirements:
        ShellCommandRequirement: {}
      inputs: {inp: File}
      arguments:
        - {valueFrom: "cat $(inputs.inp.path) | tr a-z A-Z | wc -c", shellQuote: false}
      stdout: piped.txt
      outputs: {out: stdout}
    in: {inp: farewell/out}
    out: [out]
