cwlVersion: v1.2
class: Workflow
inputs:
  word: string
outputs:
  final: {type: File, outputSource: count_it/out}
steps:
  make_it:
    run: make.cwl
    in: {word: word}
    out: [out]
  upper_it:
    run: upper.cwl
    in: {inp: make_it/out}
    out: [out]
  count_it:
    run: count.cwl
    in: {inp: upper_it/out}
    out: [out]
