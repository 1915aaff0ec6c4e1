cwlVersion: v1.2
class: Workflow
inputs:
  word: string
outputs:
  out: {type: File, outputSource: reverse/out}
steps:
  say:
    run: echo.cwl
    in: {word: word}
    out: [out]
  reverse:
    run: rev.cwl
    in: {inp: say/out}
    out: [out]
